//! A NaN is an engine error naming the op that produced it (numerics N7), never a value passed on.
mod forward_support;

use lockstep::exec::observe::{NanGuard, Observed};
use lockstep::exec::{CpuExecutor, ExecError, Executor, Out};

#[test]
fn the_op_that_makes_a_nan_is_named_and_finite_ops_pass() {
    let t = forward_support::tiny();
    let mut ex = Observed { inner: CpuExecutor::new(&t.ckpt), obs: NanGuard };
    let x = ex.upload(2, 4, &[1.0, -2.0, 0.5, 3.0, f32::INFINITY, 1.0, 2.0, -1.0]).unwrap();
    let y = ex.scale(&x, 2.0, Out::F32).expect("inf times 2 is no NaN");
    assert_eq!(ex.read(&y).unwrap()[4], f32::INFINITY);
    match ex.scale(&x, 0.0, Out::F32) {
        Err(e @ ExecError::NaN { op: "scale", index: 4 }) => assert!(e.to_string().contains("op `scale` produced a NaN at element 4"), "{e}"),
        other => panic!("inf times 0 must fail as a NaN in scale at element 4, got {:?}", other.map(|_| ())),
    }
    let z = ex.add(&x, &x, Out::F32).unwrap();
    let minus = ex.scale(&x, -2.0, Out::F32).unwrap();
    match ex.add(&z, &minus, Out::F32) {
        Err(ExecError::NaN { op: "add", index: 4 }) => {}
        other => panic!("inf - inf must fail in add, got {:?}", other.map(|_| ())),
    }
}
