//! [`Work`]: a handle to a collective in flight (c10d's `Work`).

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::buffer::Buffer;
use crate::error::DistError;

/// What a backend reports when a collective is done: its result buffer (empty for those
/// without one: barrier, send).
pub type Completion = Result<Buffer, DistError>;

/// What runs when a [`Work`] completes, in the waiting thread: typically copies the result
/// into the caller's tensor.
pub type OnComplete = Box<dyn FnOnce(Buffer) -> Result<(), DistError> + Send>;

enum State {
    Pending {
        rx: Receiver<Completion>,
        on_complete: Option<OnComplete>,
    },
    Done(Result<(), DistError>),
}

/// A collective in flight: [`wait`](Work::wait) blocks until it is done (or the group's timeout
/// passes) and then makes its result visible in the tensors it was given.
///
/// Cloning shares the handle: whichever clone waits first finishes the work, the others see
/// its outcome.
#[derive(Clone)]
pub struct Work {
    state: Arc<Mutex<State>>,
    description: Arc<str>,
    timeout: Duration,
    on_timeout: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for Work {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Work({})", self.description)
    }
}

impl Work {
    /// A work finished when `rx` delivers; `description` names it in errors (`WorkMPI(SeqNum=3,
    /// OpType=ALLREDUCE, ...)`), `on_timeout` runs when a wait gives up (the group marks itself
    /// aborted).
    pub fn new(
        rx: Receiver<Completion>,
        description: String,
        timeout: Duration,
        on_timeout: Arc<dyn Fn() + Send + Sync>,
    ) -> Work {
        Work {
            state: Arc::new(Mutex::new(State::Pending {
                rx,
                on_complete: None,
            })),
            description: description.into(),
            timeout,
            on_timeout,
        }
    }

    /// A work that has already failed (a collective refused before it was launched).
    pub fn failed(e: DistError) -> Work {
        Work {
            state: Arc::new(Mutex::new(State::Done(Err(e)))),
            description: "failed".into(),
            timeout: Duration::ZERO,
            on_timeout: Arc::new(|| {}),
        }
    }

    /// A work that is already complete (PyTorch's `FakeWork`: what the collectives' Meta kernels
    /// return, as nothing is communicated).
    pub fn completed(description: &str) -> Work {
        Work {
            state: Arc::new(Mutex::new(State::Done(Ok(())))),
            description: description.into(),
            timeout: Duration::ZERO,
            on_timeout: Arc::new(|| {}),
        }
    }

    /// The work with `timeout` in place of the group's for [`wait`](Self::wait) (a
    /// collective's own timeout option).
    pub fn with_timeout(mut self, timeout: Duration) -> Work {
        self.timeout = timeout;
        self
    }

    /// Sets what runs with the result when the work completes.
    pub fn then(self, f: OnComplete) -> Work {
        if let State::Pending { on_complete, .. } = &mut *self.lock() {
            *on_complete = Some(f);
        }
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the work is, for messages.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Whether the collective finished (successfully or not); does not block.
    pub fn is_completed(&self) -> bool {
        let mut state = self.lock();
        if let State::Pending { rx, .. } = &*state {
            match rx.try_recv() {
                Ok(c) => Self::finish(&mut state, c),
                Err(std::sync::mpsc::TryRecvError::Empty) => return false,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => Self::finish(
                    &mut state,
                    Err(DistError::Backend(
                        "the process group's communication thread stopped".into(),
                    )),
                ),
            }
        }
        true
    }

    /// Blocks until the collective is done, within the group's timeout, and makes its result
    /// visible; the error names the collective when it failed or timed out.
    pub fn wait(&self) -> Result<(), DistError> {
        self.wait_for(self.timeout)
    }

    /// [`wait`](Self::wait) with another timeout.
    pub fn wait_for(&self, timeout: Duration) -> Result<(), DistError> {
        let start = Instant::now();
        let mut state = self.lock();
        if let State::Pending { rx, .. } = &*state {
            let c = match rx.recv_timeout(timeout) {
                Ok(c) => c,
                Err(RecvTimeoutError::Timeout) => {
                    (self.on_timeout)();
                    Err(DistError::Timeout(format!(
                        "Watchdog caught collective operation timeout: {} ran for {} \
                         milliseconds before timing out (a rank died, hangs, or did not call \
                         this collective)",
                        self.description,
                        start.elapsed().as_millis()
                    )))
                }
                Err(RecvTimeoutError::Disconnected) => Err(DistError::Backend(
                    "the process group's communication thread stopped".into(),
                )),
            };
            Self::finish(&mut state, c);
        }
        match &*state {
            State::Done(r) => r.clone(),
            State::Pending { .. } => unreachable!("finish leaves the work done"),
        }
    }

    fn finish(state: &mut State, c: Completion) {
        let on_complete = match state {
            State::Pending { on_complete, .. } => on_complete.take(),
            State::Done(_) => return,
        };
        let r = c.and_then(|buf| match on_complete {
            Some(f) => f(buf),
            None => Ok(()),
        });
        *state = State::Done(r);
    }
}
