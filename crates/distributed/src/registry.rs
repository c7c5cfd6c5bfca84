//! The default process group and the groups registered by name (`init_process_group`,
//! `destroy_process_group`, c10d's group registry).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::backend::{Backend, SingleProcess};
use crate::error::DistError;
use crate::process_group::{ProcessGroup, ProcessGroupOptions};

/// The name of the default group (PyTorch names groups by their creation order, from "0").
pub const WORLD: &str = "0";

/// The communication engine of [`init_process_group`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// MPI (built with the `mpi` feature; launched by `mpirun`).
    Mpi,
    /// One process alone (no MPI needed): every collective is the identity.
    SingleProcess,
}

static GROUPS: Mutex<Option<HashMap<String, Arc<ProcessGroup>>>> = Mutex::new(None);

fn groups() -> MutexGuard<'static, Option<HashMap<String, Arc<ProcessGroup>>>> {
    GROUPS.lock().unwrap_or_else(|e| e.into_inner())
}

fn backend(kind: BackendKind) -> Result<Box<dyn Backend>, DistError> {
    match kind {
        BackendKind::SingleProcess => Ok(Box::new(SingleProcess::default())),
        #[cfg(feature = "mpi")]
        BackendKind::Mpi => Ok(Box::new(crate::mpi_backend::MpiBackend::init()?)),
        #[cfg(not(feature = "mpi"))]
        BackendKind::Mpi => Err(DistError::Backend(
            "this build has no MPI backend: build with `--features mpi` (it needs an MPI \
             installation)"
                .into(),
        )),
    }
}

/// Starts the default process group (`dist.init_process_group`): this process's rank among
/// the processes `mpirun` started (or the only one). Registered as [`WORLD`].
pub fn init_process_group(
    kind: BackendKind,
    options: ProcessGroupOptions,
) -> Result<Arc<ProcessGroup>, DistError> {
    let mut g = groups();
    let map = g.get_or_insert_with(HashMap::new);
    if map.contains_key(WORLD) {
        return Err(DistError::Invalid(
            "trying to initialize the default process group twice!".into(),
        ));
    }
    let group = Arc::new(ProcessGroup::new(backend(kind)?, WORLD, options));
    map.insert(WORLD.to_string(), group.clone());
    Ok(group)
}

/// Whether the default group is initialized (`dist.is_initialized`).
pub fn is_initialized() -> bool {
    groups().as_ref().is_some_and(|m| m.contains_key(WORLD))
}

/// The default group.
pub fn world() -> Result<Arc<ProcessGroup>, DistError> {
    resolve_process_group(WORLD).map_err(|_| {
        DistError::Invalid(
            "Default process group has not been initialized, please make sure to call \
             init_process_group."
                .into(),
        )
    })
}

/// The group registered under `name` (the functional collectives' `group_name`).
pub fn resolve_process_group(name: &str) -> Result<Arc<ProcessGroup>, DistError> {
    groups()
        .as_ref()
        .and_then(|m| m.get(name).cloned())
        .ok_or_else(|| {
            DistError::Invalid(format!(
                "Could not resolve the process group registered under the name {name}"
            ))
        })
}

/// Ends every group after the collectives already launched (`dist.destroy_process_group`);
/// MPI is finalized and cannot be started again in this process.
pub fn destroy_process_group() {
    let all = groups().take();
    for g in all.into_iter().flat_map(|m| m.into_values()) {
        g.shutdown();
    }
}
