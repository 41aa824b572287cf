//! Isolated operators (`AotOpBuilder::isolated`): the same results as in-process, and a
//! crash, abort, exit or hang in user code is an error naming the function, after which the
//! next call works in a fresh worker.
use std::time::Duration;

use ndarray::array;
use tritium_aot::{AotError, AotOpBuilder, Attrs, DType, Isolation, Target};

use super::common::op;

fn add_one(f: &str) -> AotOpBuilder {
    op("crashes.cc", f)
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .isolated()
}

fn worker_error(err: &AotError, function: &str, what: &str) {
    match err {
        AotError::Worker {
            function: f,
            message,
        } => {
            assert_eq!(f, function, "{err}");
            assert!(message.contains(what), "{err}");
        }
        _ => panic!("expected a worker error, got {err}"),
    }
}

#[test]
fn crashes_are_errors_and_the_next_call_works() {
    let cases = [
        ("SegfaultIfNegative", "SIGSEGV"),
        ("AbortIfNegative", "SIGABRT"),
        ("ExitIfNegative", "exit status 3"),
    ];
    let good = array![1.0f32, 2.0, 3.0];
    let bad = array![-1.0f32, 2.0, 3.0];
    for (f, what) in cases {
        let op = add_one(f).build().unwrap();
        let out = op.call1((&good,)).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(out, [2.0, 3.0, 4.0], "{f}");
        let err = op.call1((&bad,)).unwrap_err();
        worker_error(&err, f, what);
        let out = op.call1((&good,)).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(out, [2.0, 3.0, 4.0], "{f} after the crash");
    }
}

#[test]
fn a_hang_is_killed_at_the_timeout() {
    let op = add_one("SpinIfNegative")
        .isolated_with(Isolation {
            timeout: Duration::from_millis(300),
        })
        .build()
        .unwrap();
    let err = op.call1((&array![-1.0f32],)).unwrap_err();
    worker_error(&err, "SpinIfNegative", "timeout");
    let out = op
        .call1((&array![1.0f32],))
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(out, [2.0]);
}

#[test]
fn user_stdout_does_not_disturb_the_worker() {
    let op = add_one("Chatty").build().unwrap();
    for _ in 0..3 {
        let out = op
            .call1((&array![0.5f32],))
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(out, [1.5]);
    }
}

/// Attributes, `FuncInit`, kernel data, workspaces, data-dependent shapes and guard checks
/// behave as in-process.
#[test]
fn isolated_results_equal_in_process_ones() {
    let with_attrs = |iso: bool| {
        let b = op("add_attr.cc", "CustomAdd")
            .infer_shape(|x| x[0].clone())
            .out_dtype(DType::F32)
            .attr("scale", 0.7)
            .attr("paddings", [2, 2]);
        if iso { b.isolated() } else { b }.build().unwrap()
    };
    let (x, y) = (
        array![[1.0f32, 2.0], [3.0, 4.0]],
        array![[1.0f32, 10.0], [-1.0, 0.5]],
    );
    let other = Attrs::new().with("scale", 0.5).with("paddings", [0, 1]);
    let (a, b) = (with_attrs(false), with_attrs(true));
    assert_eq!(
        a.call1((&x, &y)).unwrap().to_vec::<f32>().unwrap(),
        b.call1((&x, &y)).unwrap().to_vec::<f32>().unwrap()
    );
    assert_eq!(
        a.call_with((&x, &y), &other).unwrap()[0]
            .to_vec::<f32>()
            .unwrap(),
        b.call_with((&x, &y), &other).unwrap()[0]
            .to_vec::<f32>()
            .unwrap()
    );
    b.clear_instances();
    assert_eq!(
        b.call1((&x, &y)).unwrap().to_vec::<f32>().unwrap(),
        a.call1((&x, &y)).unwrap().to_vec::<f32>().unwrap()
    );

    let nonzero = op("nonzero.cc", "NonZero")
        .infer_shape(|x| vec![x[0][0], 1])
        .out_dtype(DType::I64)
        .data_dependent_shapes()
        .checked(true)
        .isolated()
        .build()
        .unwrap();
    let v = array![1.0f32, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0];
    let out = nonzero.call1((&v,)).unwrap();
    assert_eq!(out.shape(), [4, 1]);
    assert_eq!(out.to_vec::<i64>().unwrap(), [0, 2, 4, 7]);
}

/// Exceptions, return codes, attribute errors and guard overruns read as in-process.
#[test]
fn isolated_failures_read_as_in_process_ones() {
    let x = array![1.0f32, 2.0, 3.0];
    for f in [
        "Throws",
        "ReturnsSeven",
        "InitFails",
        "InitThrows",
        "MissingAttr",
        "WrongAttrType",
        "OutputOverrun",
        "WorkspaceOverrun",
    ] {
        let build = |iso: bool| {
            let b = op("faults.cc", f)
                .infer_shape(|x| x[0].clone())
                .out_dtype(DType::F32)
                .attr("scale", 0.5)
                .checked(true);
            if iso { b.isolated() } else { b }.build().unwrap()
        };
        let here = build(false).call((&x,)).unwrap_err().to_string();
        let there = build(true).call((&x,)).unwrap_err().to_string();
        assert_eq!(here, there, "{f}");
    }
}

#[test]
fn cuda_operators_are_not_isolated() {
    let err = op("add.cc", "CustomAdd")
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .target(Target::Cuda)
        .isolated()
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("isolation runs CPU operators"),
        "{err}"
    );
}
