//! Faults under `mpirun`: a rank that is late or never comes makes the others fail with a
//! clear error within the group's timeout; a rank that dies ends the job instead of hanging
//! it; mismatched collectives are detected and reported on every rank.
#![cfg(feature = "mpi")]

mod common;

use std::time::Duration;

use switchboard_cpu as _;
use switchboard_distributed::{destroy_process_group, DistError, ProcessGroupOptions, ReduceOp};
use switchboard_tensor::{ScalarType, Tensor};

#[test]
fn a_missing_rank_times_out() {
    let name = "a_missing_rank_times_out";
    if !common::is_rank(name) {
        return common::mpirun_ok(name, 2);
    }
    let pg = common::init(ProcessGroupOptions {
        timeout: Duration::from_millis(1500),
        ..Default::default()
    });
    let t = Tensor::ones(&[3], ScalarType::Float).unwrap();
    if pg.rank() == 0 {
        let err = pg.all_reduce(&t, ReduceOp::Sum).wait().unwrap_err();
        assert!(matches!(err, DistError::Timeout(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "Watchdog caught collective operation timeout: WorkMPI(SeqNum=0, \
                 OpType=ALLREDUCE, NumelIn=3, Timeout(ms)=1500) ran for "
            ),
            "{msg}"
        );
        // The group is aborted: nothing else runs on it.
        let err = pg.barrier().wait().unwrap_err().to_string();
        assert_eq!(
            err,
            "[Rank 0] the process group was aborted after a collective timed out; no further \
             collective can run"
        );
        // Tell the late rank (by file: the group cannot carry it) that it may come now.
        std::fs::write(flag_path(), b"done").unwrap();
    } else {
        // Late: joins only after rank 0 gave up, so that both can end cleanly.
        while !flag_path().exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
        pg.all_reduce(&t, ReduceOp::Sum).wait().unwrap();
        let _ = std::fs::remove_file(flag_path());
    }
    destroy_process_group();
}

fn flag_path() -> std::path::PathBuf {
    // One per job (mpirun's job id), in the target directory.
    let job = std::env::var("OMPI_MCA_ess_base_jobid").unwrap_or_default();
    std::env::temp_dir().join(format!("switchboard-timeout-test-{job}"))
}

#[test]
fn a_dead_rank_ends_the_job() {
    let name = "a_dead_rank_ends_the_job";
    if !common::is_rank(name) {
        let out = common::mpirun(name, 2);
        // mpirun ends the job with the dead rank's status rather than letting rank 0 wait.
        assert!(!out.status.success(), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("rank 1 exits before the collective"),
            "{stderr}"
        );
        return;
    }
    let pg = common::init(ProcessGroupOptions {
        timeout: Duration::from_secs(60),
        ..Default::default()
    });
    if pg.rank() == 1 {
        eprintln!("rank 1 exits before the collective");
        std::process::exit(3);
    }
    let t = Tensor::ones(&[3], ScalarType::Float).unwrap();
    // Killed by mpirun, or timed out: either way the job ends with an error.
    let r = pg.all_reduce(&t, ReduceOp::Sum).wait();
    eprintln!("rank 0: {r:?}");
    std::process::exit(1);
}

#[test]
fn mismatched_collectives_are_reported() {
    let name = "mismatched_collectives_are_reported";
    if !common::is_rank(name) {
        return common::mpirun_ok(name, 2);
    }
    let pg = common::init(ProcessGroupOptions {
        timeout: Duration::from_secs(60),
        check_collectives: true,
    });
    let rank = pg.rank();
    // Different shapes.
    let t = Tensor::ones(&[4 + rank as i64], ScalarType::Float).unwrap();
    let err = pg.all_reduce(&t, ReduceOp::Sum).wait().unwrap_err();
    assert!(matches!(err, DistError::Mismatch(_)), "{err}");
    let (me, other) = (rank, 1 - rank);
    assert_eq!(
        err.to_string(),
        format!(
            "Detected mismatch between collectives on ranks. Rank {me} is running collective: \
             CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[{}], \
             TensorDtypes=Float), but Rank {other} is running collective: \
             CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[{}], \
             TensorDtypes=Float). Collectives differ in the following aspects: \t Tensor Tensor \
             shapes: [{}]vs [{}]",
            4 + me,
            4 + other,
            4 + me,
            4 + other
        )
    );
    // Different dtypes, then different collectives.
    let dtype = [ScalarType::Float, ScalarType::Double][rank];
    let t = Tensor::ones(&[4], dtype).unwrap();
    let err = pg
        .all_reduce(&t, ReduceOp::Sum)
        .wait()
        .unwrap_err()
        .to_string();
    assert!(err.contains("Tensor Tensor dtypes: "), "{err}");
    let t = Tensor::ones(&[4], ScalarType::Float).unwrap();
    let work = if rank == 0 {
        pg.all_reduce(&t, ReduceOp::Sum)
    } else {
        pg.broadcast(&t, 0)
    };
    let err = work.wait().unwrap_err().to_string();
    assert!(err.contains("Op type: "), "{err}");
    // Matching calls still run after the reported ones.
    pg.all_reduce(&t, ReduceOp::Sum).wait().unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), [2.0; 4]);
    destroy_process_group();
}
