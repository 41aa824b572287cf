//! Triton's cache hints on `load`/`store` (`cache_modifier`, `eviction_policy`,
//! `volatile`): they change no result on any device, and each target emits what it has for
//! them (PTX cache operators and eviction priorities, volatile loads); on the CPU a
//! streaming store stays a vector store.

use crate::common::{all_devices, random_f32};
use tritium::prelude::*;

/// `out = 2 x` with the hints given as constexpr switches.
#[kernel]
fn scaled(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize, #[constexpr] HINT: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let m = offs < n;
    let v = match HINT {
        1 => load(x + offs, mask = m, cache_modifier = ".cg"),
        2 => load(x + offs, mask = m, eviction_policy = "evict_last"),
        3 => load(x + offs, mask = m, volatile = true),
        _ => load(x + offs, mask = m),
    };
    match HINT {
        1 => store(out + offs, v * 2.0, mask = m, cache_modifier = ".cs"),
        2 => store(
            out + offs,
            v * 2.0,
            mask = m,
            eviction_policy = "evict_first",
        ),
        _ => store(out + offs, v * 2.0, mask = m),
    }
}

#[test]
fn hints_change_no_result_on_any_device() {
    let n = 1000;
    let x = random_f32(n, 3);
    let want: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    for device in all_devices() {
        for hint in 0..4 {
            let mut out = vec![0f32; n];
            scaled::launch(
                &device,
                n.div_ceil(256),
                &mut out[..],
                &x[..],
                n as i32,
                256,
                hint,
            )
            .unwrap();
            assert_eq!(out, want, "{device:?}, hint {hint}");
        }
    }
}

/// The IR carries the hints and prints them back.
#[test]
fn hints_are_in_the_ir() {
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    let text = |hint| tritium::dsl::ir::print_function(&scaled::trace(&s, 256, hint).unwrap());
    let (cg, evict, volatile, none) = (text(1), text(2), text(3), text(0));
    assert!(
        cg.contains("cache = \".cg\"") && cg.contains("cache = \".cs\""),
        "{cg}"
    );
    assert!(evict.contains("eviction = \"evict_last\""), "{evict}");
    assert!(evict.contains("eviction = \"evict_first\""), "{evict}");
    assert!(volatile.contains("volatile = true"), "{volatile}");
    assert!(
        !none.contains("cache =") && !none.contains("eviction ="),
        "{none}"
    );
    let back = tritium::dsl::ir::parse_function(&cg).unwrap();
    assert_eq!(tritium::dsl::ir::print_function(&back), cg);
}

/// PTX gets the cache operators, the eviction priorities and a volatile load, for sm_80 and sm_90; without hints it gets none of them.
#[test]
fn ptx_carries_the_hints() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    for sm in [80, 90] {
        let copts = CudaCompileOptions {
            sm,
            ..Default::default()
        };
        let ptx = |hint| {
            compile_ptx(&scaled::trace(&s, 256, hint).unwrap(), "k", &copts)
                .unwrap()
                .text
        };
        let cg = ptx(1);
        assert!(
            cg.contains("ld.global.cg"),
            "sm_{sm}: no ld.global.cg in\n{cg}"
        );
        assert!(
            cg.contains("st.global.cs"),
            "sm_{sm}: no st.global.cs in\n{cg}"
        );
        // Eviction priorities need PTX 7.4; every target's PTX is at least 7.5.
        let evict = ptx(2);
        let load = evict.contains("ld.global.L1::evict_last");
        let store = evict.contains("st.global.L1::evict_first");
        assert_eq!((load, store), (true, true), "sm_{sm}:\n{evict}");
        let volatile = ptx(3);
        assert!(
            volatile.contains("ld.volatile.global"),
            "sm_{sm}:\n{volatile}"
        );
        let none = ptx(0);
        for op in [".cg", ".cs", "evict_", "volatile"] {
            assert!(!none.contains(op), "sm_{sm}: {op} without a hint");
        }
    }
}

/// On x86 a `.cs` store loop is vectorized like a plain one. It used to carry LLVM's
/// non-temporal mark, which kept the loop scalar (`movntss` one lane at a time on AMD, a
/// plain `vmovss` on the H100 machine's Xeon, which has no unaligned non-temporal store).
#[cfg(target_arch = "x86_64")]
#[test]
fn streaming_stores_stay_vector_stores_on_the_cpu() {
    let asm = |hint: usize| {
        let n = 1024;
        let x = random_f32(n, 4);
        let mut out = vec![0f32; n];
        let dumps = crate::common::dumps_of(&format!("hints-{hint}"), |options| {
            scaled::launch_with(
                &Device::cpu(),
                4,
                options,
                &mut out[..],
                &x[..],
                n as i32,
                256,
                hint,
            )
            .unwrap()
        });
        dumps.get("s").to_string()
    };
    // A store of a whole vector register to memory.
    let vector_store = |asm: &str| {
        asm.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("vmovup")
                && (l.contains("%ymm") || l.contains("%zmm") || l.contains("%xmm"))
                && l.ends_with(')')
        })
    };
    for (hint, what) in [(1, "streaming"), (0, "plain")] {
        let asm = asm(hint);
        assert!(vector_store(&asm), "{what}: no vector store in:\n{asm}");
        assert!(
            !asm.contains("movnt"),
            "{what}: a scalar non-temporal store in:\n{asm}"
        );
    }
}
