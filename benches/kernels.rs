//! Criterion benchmarks: each Tritium kernel beside its baseline in one group.
//! `cargo bench` (the table example `scripts/dev bench` prints the same comparisons as ratios).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndarray::{Array1, Array2, Axis, Zip};
use tritium::Device;
use tritium_kernels::bench::bandwidth_loop;
use tritium_kernels::softmax::softmax_rows_into;
use tritium_kernels::vector_add::{add, ADD_BLOCK};

fn vector_add(c: &mut Criterion) {
    let n = 1 << 24;
    let x = Array1::from_iter((0..n).map(|i| (i % 97) as f32));
    let y = Array1::from_iter((0..n).map(|i| (i % 13) as f32));
    let mut out = Array1::<f32>::zeros(n);
    let mut g = c.benchmark_group("vector_add_2^24_f32");
    g.throughput(Throughput::Bytes(12 * n as u64));
    g.sample_size(20);
    let device = Device::cpu();
    g.bench_function("tritium", |b| {
        b.iter(|| {
            add::launch(
                &device,
                n.div_ceil(ADD_BLOCK),
                &mut out,
                &x,
                &y,
                n as i32,
                ADD_BLOCK,
            )
            .unwrap()
        })
    });
    let mut z = Array1::<f32>::zeros(n);
    g.bench_function("ndarray_par_zip", |b| {
        b.iter(|| {
            Zip::from(&mut z)
                .and(&x)
                .and(&y)
                .par_for_each(|o, a, b| *o = a + b)
        })
    });
    let (xs, ys) = (x.as_slice().unwrap(), y.as_slice().unwrap());
    let mut w = vec![0f32; n];
    g.bench_function("bandwidth_loop", |b| {
        b.iter(|| bandwidth_loop(&mut w, xs, ys))
    });
    g.finish();
}

fn softmax(c: &mut Criterion) {
    let (r, n) = (4096, 1024);
    let x = Array2::from_shape_fn((r, n), |(i, j)| ((i * 31 + j * 17) % 101) as f32 / 25.0);
    let mut out = Array2::<f32>::zeros((r, n));
    let mut g = c.benchmark_group("softmax_4096x1024_f32");
    g.throughput(Throughput::Bytes(8 * (r * n) as u64));
    g.sample_size(10);
    let device = Device::cpu();
    g.bench_function("tritium", |b| {
        b.iter(|| softmax_rows_into(&device, x.view(), out.view_mut()).unwrap())
    });
    g.bench_function("ndarray", |b| {
        b.iter(|| {
            let m = x.map_axis(Axis(1), |row| row.fold(f32::NEG_INFINITY, |a, b| a.max(*b)));
            let e = (&x - &m.insert_axis(Axis(1))).mapv(f32::exp);
            let s = e.sum_axis(Axis(1));
            &e / &s.insert_axis(Axis(1))
        })
    });
    g.finish();
}

criterion_group!(benches, vector_add, softmax);
criterion_main!(benches);
