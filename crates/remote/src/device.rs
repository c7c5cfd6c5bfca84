//! The `remote_accelerator` device (Genie's name): lazy devices whose graphs a worker runs.

use std::sync::Arc;

use switchboard_dispatcher::Result;
use switchboard_keys::{BackendComponent, DeviceType};
use switchboard_lazy as lazy;
use switchboard_tensor::{Device, TensorError};

use crate::client::ClientConfig;
use crate::executor::RemoteExecutor;
use crate::transport::TlsTrust;
use crate::worker::TOKEN_ENV;

/// The device's name, as Genie names it.
pub const DEVICE_NAME: &str = "remote_accelerator";

/// The environment variable naming the worker (`HOST:PORT`) a program's
/// `remote_accelerator:0` connects to when it is not given one (`switchboard call`).
pub const WORKER_ENV: &str = "SWITCHBOARD_WORKER";

/// The environment variable holding the CA certificate (PEM) a TLS worker's certificate must
/// chain to; without it the connection is plain TCP.
pub const WORKER_CA_ENV: &str = "SWITCHBOARD_WORKER_CA";

// Note [The remote accelerator]
// `remote_accelerator` is PrivateUse1 renamed, as Genie's aten registrations use PrivateUse1,
// and made a lazy device type (`switchboard_lazy::install`, Note [Lazy device types]): its
// tensors are captured exactly as `lazy` ones. What makes it remote is its devices' executor:
// `connect` gives `remote_accelerator:N` a `RemoteExecutor` over a client of one worker, so its
// graphs run there and their results stay there (Note [Remote tensors]); with lazy mode off its
// calls run on the worker one at a time (Note [Eager calls on the executor]), and a profiled
// device adds the time the worker spent on each operator to its per-operator profile. Data
// moves only when the host asks: reading values, printing, `to("cpu")`.

/// Installs the `remote_accelerator` device type (once; later calls return it).
pub fn install() -> Result<DeviceType> {
    lazy::install(BackendComponent::PrivateUse1Bit, DEVICE_NAME)
}

/// Connects `remote_accelerator:index` to the worker at `addr` (see Note [The remote
/// accelerator]) and returns the device. A device connected before is reconnected (its
/// pending graph runs on the new worker; tensors the old worker kept cannot be read any more:
/// they report lost state).
pub fn connect(index: i16, addr: &str, config: ClientConfig) -> Result<Device> {
    install()?;
    let device = Device::with_index(DeviceType::PrivateUse1, index);
    let backend = lazy::backend(device)?;
    let executor =
        RemoteExecutor::connect(addr, config).map_err(|e| TensorError::invalid(e.to_string()))?;
    executor.report_to(backend);
    backend.set_executor(executor as Arc<dyn lazy::Executor>);
    backend.set_eager_on_executor(true);
    Ok(device)
}

/// Connects `remote_accelerator:0` to the worker `SWITCHBOARD_WORKER` names, with the token of
/// `SWITCHBOARD_WORKER_TOKEN`; an error says what is missing.
pub fn connect_from_env() -> Result<Device> {
    let addr = std::env::var(WORKER_ENV).map_err(|_| {
        TensorError::invalid(format!(
            "{DEVICE_NAME} needs a worker: set {WORKER_ENV}=HOST:PORT (started with \
             `switchboard worker --listen HOST:PORT`)"
        ))
    })?;
    connect(0, &addr, client_config_from_env(&addr))
}

/// The client settings for the worker at `addr` that the environment gives: the token of
/// `SWITCHBOARD_WORKER_TOKEN`, and TLS trusting the certificate `SWITCHBOARD_WORKER_CA` names
/// (checked against `addr`'s host name); the defaults otherwise.
pub fn client_config_from_env(addr: &str) -> ClientConfig {
    let tls = std::env::var_os(WORKER_CA_ENV).map(|ca| TlsTrust {
        ca: ca.into(),
        server_name: addr
            .rsplit_once(':')
            .map_or(addr, |(host, _)| host)
            .trim_matches(['[', ']'])
            .to_string(),
    });
    ClientConfig {
        token: std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
        tls,
        ..ClientConfig::default()
    }
}

/// Whether `device` is a `remote_accelerator` device (installed, PrivateUse1 under that name).
pub fn is_remote(device: Device) -> bool {
    device.ty == DeviceType::PrivateUse1
        && BackendComponent::PrivateUse1Bit.renamed() == Some(DEVICE_NAME)
}
