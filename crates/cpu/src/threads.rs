//! The threads the kernels' parallel loops run on (PyTorch's `at::set_num_threads`): rayon's
//! threads, with the thread that calls the kernels one of them.

use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{invalid, Result};

// Note [The caller is one of the kernel threads]
// A parallel loop started by a thread outside the rayon pool hands the whole loop to the pool
// and sleeps until it is done: every loop then costs a wake-up of the workers and one of the
// caller, two context switches at least. A training step runs hundreds of loops, short ones
// among them; on two threads these switches measured about a tenth of a ResNet step (27.9
// against 25.2 ms) and more of the MLP step (1.64 against 1.18 ms). PyTorch avoids them by
// construction: its main thread is one of OpenMP's threads and runs its share of each loop
// while the other threads join in. The same holds here when the calling thread is one of the
// pool's: a loop it starts runs on it, and the other threads steal their share. Either the
// program's thread joins the global pool (`set_num_threads`, for a program's main thread) or
// the work moves onto a thread of a pool of its own (`with_num_threads`, for a library call
// such as the CLI's training). Its own: a pool thread that waits for the rest of a loop runs
// other jobs of its pool meanwhile, and if those could be other callers' whole closures, one
// would run nested in another, under the other's grad mode and dispatch guards (the loops'
// own jobs are kernel code, which reads no such state). Loops nested in a loop's body still
// run serially (Note [Parallel regions] in `loops`).

/// Makes the kernels run on `n` threads, the calling thread one of them (Note [The caller is
/// one of the kernel threads]): rayon's global pool is built with `n` threads, the calling
/// thread its thread 0 when `n > 1`. Meant for a program's main thread, before any kernel runs
/// a parallel loop. As rayon's global pool is built once, a later call succeeds only when it
/// asks for the same configuration.
///
/// ```
/// use switchboard_cpu::threads::set_num_threads;
/// set_num_threads(2).unwrap();
/// assert_eq!((rayon::current_num_threads(), rayon::current_thread_index()), (2, Some(0)));
/// let err = set_num_threads(3).unwrap_err().to_string();
/// assert!(err.contains("already run on 2 threads"), "{err}");
/// assert!(set_num_threads(0).is_err());
/// ```
pub fn set_num_threads(n: usize) -> Result<()> {
    if n == 0 {
        return Err(invalid("set_num_threads expects a positive integer"));
    }
    let builder = ThreadPoolBuilder::new().num_threads(n);
    // With one thread nothing runs in parallel (`loops::runs_in_parallel`); the calling
    // thread stays out of the pool, whose own thread then serves any other thread's calls.
    let builder = if n > 1 {
        builder.use_current_thread()
    } else {
        builder
    };
    if builder.build_global().is_ok() {
        return Ok(());
    }
    let current = rayon::current_num_threads();
    let caller_in_pool = rayon::current_thread_index().is_some();
    if current == n && (caller_in_pool || n == 1) {
        return Ok(());
    }
    Err(invalid(format!(
        "set_num_threads({n}): the kernels already run on {current} threads{}; rayon's global \
         pool is built once, so call set_num_threads before any kernel runs",
        if caller_in_pool {
            ""
        } else {
            ", the calling thread not among them"
        }
    )))
}

/// Runs `f` on one of the kernel threads (Note [The caller is one of the kernel threads]):
/// on the calling thread when it is one already (in a pool of `threads` threads, if given),
/// else on a new pool of `threads` threads (rayon's default count when `None`) for the
/// duration of the call. Never on another caller's pool: a pool thread waiting inside a loop
/// may run other jobs of its pool, and a whole foreign `f` run that way would see this
/// thread's state (grad mode, dispatch guards) as its own.
///
/// ```
/// use switchboard_cpu::threads::with_num_threads;
/// let seen = with_num_threads(Some(3), || {
///     (rayon::current_num_threads(), rayon::current_thread_index().is_some())
/// });
/// assert_eq!(seen.unwrap(), (3, true));
/// ```
pub fn with_num_threads<R: Send>(
    threads: Option<usize>,
    f: impl FnOnce() -> R + Send,
) -> Result<R> {
    if threads == Some(0) {
        return Err(invalid(
            "with_num_threads expects a positive number of threads",
        ));
    }
    let in_pool = rayon::current_thread_index().is_some();
    if in_pool && threads.is_none_or(|n| n == rayon::current_num_threads()) {
        return Ok(f());
    }
    Ok(new_pool(threads)?.install(f))
}

/// A new pool of `threads` threads (rayon's default count when `None`).
fn new_pool(threads: Option<usize>) -> Result<ThreadPool> {
    let mut builder = ThreadPoolBuilder::new();
    if let Some(n) = threads {
        builder = builder.num_threads(n);
    }
    builder
        .build()
        .map_err(|e| invalid(format!("cannot start the kernel threads: {e}")))
}

/// A job for a [`KernelThread`].
type Job = Box<dyn FnOnce() + Send>;

/// A thread of a kernel pool of its own that runs the jobs submitted to it one after another
/// (Note [The caller is one of the kernel threads]): for a server whose requests call kernels
/// from threads outside any pool. The jobs run one at a time, on the same thread, never one
/// nested in another. The thread and its pool stop once the `KernelThread` is dropped and the
/// jobs submitted before have run.
///
/// ```
/// use std::sync::mpsc;
/// use switchboard_cpu::threads::KernelThread;
/// let kernels = KernelThread::start(Some(2)).unwrap();
/// let (tx, rx) = mpsc::channel();
/// kernels
///     .submit(move || tx.send(rayon::current_thread_index().is_some()).unwrap())
///     .unwrap();
/// assert!(rx.recv().unwrap(), "the job ran on one of the pool's threads");
/// ```
pub struct KernelThread {
    jobs: std::sync::mpsc::Sender<Job>,
}

impl KernelThread {
    /// Starts the thread and its pool of `threads` threads (rayon's default count when `None`),
    /// the thread one of them.
    pub fn start(threads: Option<usize>) -> Result<KernelThread> {
        if threads == Some(0) {
            return Err(invalid(
                "a kernel thread needs a positive number of threads",
            ));
        }
        let pool = new_pool(threads)?;
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("switchboard-kernels".into())
            .spawn(move || pool.install(|| queue.into_iter().for_each(|job| job())))
            .map_err(|e| invalid(format!("cannot start the kernel thread: {e}")))?;
        Ok(KernelThread { jobs })
    }

    /// Queues `job` to run on the kernel thread after the jobs submitted before it. A job that
    /// panics ends the thread (the later jobs are dropped unrun): catch what a job may throw.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> Result<()> {
        self.jobs
            .send(Box::new(job))
            .map_err(|_| invalid("the kernel thread has stopped"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::{parallel_region, runs_in_parallel, GRAIN_SIZE};

    #[test]
    fn loops_started_on_a_pool_thread_run_in_parallel_but_not_nested_ones() {
        let (outer, nested) = with_num_threads(Some(2), || {
            (
                runs_in_parallel(GRAIN_SIZE * 4),
                parallel_region(|| runs_in_parallel(GRAIN_SIZE * 4)),
            )
        })
        .unwrap();
        assert!(
            outer,
            "a pool thread's loop must share its work with the other threads"
        );
        assert!(!nested, "a loop inside a loop's body runs serially");
    }

    #[test]
    fn concurrent_callers_never_run_inside_each_other() {
        // Each caller's closure marks its thread while it runs, and starts parallel loops
        // (during which a pool thread may run other jobs of its pool): no closure may start
        // on a thread another closure has marked.
        thread_local! {
            static BUSY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        let run = || {
            with_num_threads(None, || {
                assert!(
                    !BUSY.with(|b| b.replace(true)),
                    "ran inside another caller's closure"
                );
                for _ in 0..20 {
                    crate::loops::parallel_for(1 << 16, 1 << 10, |s, e| {
                        std::hint::black_box((s..e).sum::<usize>());
                    });
                }
                BUSY.with(|b| b.set(false));
            })
            .unwrap()
        };
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..4).map(|_| s.spawn(run)).collect();
            handles.into_iter().for_each(|h| h.join().unwrap());
        });
    }

    #[test]
    fn zero_threads_is_an_error() {
        let err = with_num_threads(Some(0), || ()).unwrap_err().to_string();
        assert!(err.contains("positive"), "{err}");
    }
}
