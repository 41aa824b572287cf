//! Portable packages: GE's key/value format, and operators that load back without a compiler.
use ndarray::{array, Array2};
use tritium_aot::{AotError, AotOpBuilder, CompileOptions, DType, Package, PACKAGE_MAGIC};

use super::common::{op, options, scratch};

fn sample() -> Package {
    let mut p = Package::new();
    p.insert("shape:4x5", vec![1u8, 2, 3]).unwrap();
    p.insert("shape:8", Vec::<u8>::new()).unwrap();
    p
}

/// `content` followed by its SHA-256, as `Package::encode` seals it.
fn seal(content: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut out = content.to_vec();
    out.extend_from_slice(&Sha256::digest(content));
    out
}

#[test]
fn round_trip_and_exact_layout() {
    let p = sample();
    let bytes = p.encode();
    assert_eq!(&bytes[..4], &PACKAGE_MAGIC.to_le_bytes());
    assert_eq!(&bytes[..4], &[0x31, 0x52, 0x41, 0x56]);
    assert_eq!(&bytes[4..12], &[2, 0, 0, 0, 2, 0, 0, 0]);
    assert_eq!(&bytes[12..16], &[9, 0, 0, 0]);
    assert_eq!(&bytes[16..25], b"shape:4x5");
    assert_eq!(&bytes[25..32], &[3, 0, 0, 0, 1, 2, 3]);
    assert_eq!(
        bytes,
        seal(&bytes[..bytes.len() - 32]),
        "the SHA-256 of the content ends it"
    );
    assert_eq!(Package::decode(&bytes).unwrap(), p);
}

fn reason(bytes: &[u8]) -> String {
    match Package::decode(bytes) {
        Err(AotError::Package(r)) => r,
        other => panic!("expected a package error, got {other:?}"),
    }
}

#[test]
fn a_package_changed_in_any_byte_is_refused_as_damaged() {
    let good = sample().encode();
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x10;
        assert!(
            reason(&bad).contains("damaged"),
            "byte {i}: {}",
            reason(&bad)
        );
    }
    for cut in [0, 3, 11, 40] {
        assert!(reason(&good[..cut]).contains("truncated"), "cut at {cut}");
    }
    for cut in [44, good.len() - 1] {
        assert!(reason(&good[..cut]).contains("damaged"), "cut at {cut}");
    }
    // Version 1 carried no digest.
    let mut v1 = good[..good.len() - 32].to_vec();
    v1[4] = 1;
    assert!(reason(&v1).contains("version 1 package carries no checksum"));
}

#[test]
fn malformed_content_is_rejected_with_a_reason_even_when_sealed() {
    let good = sample().encode();
    let content = &good[..good.len() - 32];
    let mut bad_magic = content.to_vec();
    bad_magic[0] ^= 0xff;
    assert!(reason(&seal(&bad_magic)).contains("bad magic"));
    let mut bad_version = content.to_vec();
    bad_version[4] = 3;
    assert!(reason(&seal(&bad_version)).contains("unsupported version 3"));
    for cut in [12, 14, 20, 27, content.len() - 1] {
        assert!(
            reason(&seal(&content[..cut])).contains("truncated"),
            "cut at {cut}"
        );
    }
    let mut trailing = content.to_vec();
    trailing.push(0);
    assert!(reason(&seal(&trailing)).contains("1 trailing bytes"));
    // Two entries with the same key, built by hand.
    let mut dup = Vec::new();
    for w in [PACKAGE_MAGIC, 2, 2] {
        dup.extend_from_slice(&w.to_le_bytes());
    }
    for _ in 0..2 {
        dup.extend_from_slice(&1u32.to_le_bytes());
        dup.push(b'k');
        dup.extend_from_slice(&0u32.to_le_bytes());
    }
    assert!(reason(&seal(&dup)).contains("duplicate key `k`"));
    // A count larger than the entries present.
    let mut count = content.to_vec();
    count[8] = 3;
    assert!(reason(&seal(&count)).contains("truncated"));
    let mut p = Package::new();
    p.insert("a", vec![]).unwrap();
    assert!(p.insert("a", vec![]).is_err());
}

fn no_compiler(cache: &str) -> tritium_aot::AotOptions {
    let mut o = options();
    o.compile = CompileOptions {
        cxx: Some("/nonexistent/no-compiler-here".to_string()),
        nvcc: Some("/nonexistent/no-nvcc-here".to_string()),
        cache_dir: Some(scratch(cache)),
        ..CompileOptions::default()
    };
    o
}

#[test]
fn operator_package_loads_without_a_compiler() {
    let original = op("add_reduce.cc", "CustomKernel")
        .out_dtype(DType::F32)
        .attr("axis", 1i64)
        .attr("keep_dim", true)
        .build()
        .unwrap();
    let bytes = original.to_package().unwrap();
    let loaded = AotOpBuilder::from_package(&bytes, no_compiler("package-load"))
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(loaded.symbol(), "CustomKernel");
    assert_eq!(loaded.target(), tritium_aot::Target::Cpu);
    assert_eq!(loaded.attrs(), original.attrs());
    assert!(loaded.library_path().starts_with(scratch("package-load")));
    let x = Array2::<f32>::ones((4, 5));
    let out = loaded.call1((&x, &x)).unwrap();
    assert_eq!(out.shape(), [4, 1]);
    assert_eq!(out.to_vec::<f32>().unwrap(), [10.0; 4]);
    // Loading twice reuses the same content-addressed file.
    let again = AotOpBuilder::from_package(&bytes, no_compiler("package-load"))
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(again.library_path(), loaded.library_path());
}

#[test]
fn package_keeps_fixed_shapes_dtypes_and_flags() {
    let original = op("add_mul_div.cc", "CustomAddMulDiv")
        .out_shapes([[2], [2], [2]])
        .out_dtypes([DType::F32; 3])
        .num_inputs(2)
        .build()
        .unwrap();
    let bytes = original.to_package().unwrap();
    let pkg = Package::decode(&bytes).unwrap();
    assert!(pkg
        .get("tritium.aot.library")
        .is_some_and(|l| l.starts_with(b"\x7fELF")));
    let loaded = AotOpBuilder::from_package(&bytes, no_compiler("package-fixed"))
        .unwrap()
        .build()
        .unwrap();
    let (x, y) = (array![6.0f32, 8.0], array![2.0f32, 4.0]);
    let out = loaded.call((&x, &y)).unwrap();
    assert_eq!(out[2].to_vec::<f32>().unwrap(), [3.0, 2.0]);
    assert!(
        loaded.call((&x,)).is_err(),
        "num_inputs survives the package"
    );
}

#[test]
fn corrupted_operator_packages_are_rejected() {
    let original = op("add.cc", "CustomAdd")
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let bytes = original.to_package().unwrap();
    let err = AotOpBuilder::from_package(&bytes[..bytes.len() - 5], no_compiler("package-bad"))
        .unwrap_err();
    assert!(matches!(err, AotError::Package(_)), "{err}");
    // One changed byte anywhere (here in the library) is refused before the library is
    // written to the cache or loaded.
    let mut damaged = bytes.clone();
    let mid = damaged.len() / 2;
    damaged[mid] ^= 1;
    let err = AotOpBuilder::from_package(&damaged, no_compiler("package-damaged")).unwrap_err();
    assert!(err.to_string().contains("damaged"), "{err}");
    assert!(!scratch("package-damaged").join("packages").exists());
    let mut p = Package::new();
    p.insert("tritium.aot.symbol", b"CustomAdd".to_vec())
        .unwrap();
    let err = AotOpBuilder::from_package(&p.encode(), no_compiler("package-bad")).unwrap_err();
    assert!(err.to_string().contains("missing entry"), "{err}");
    // A package whose library bytes are garbage fails at load time, with the loader's reason.
    let decoded = Package::decode(&bytes).unwrap();
    let mut forged = Package::new();
    for (k, v) in decoded.entries() {
        let v = if k == "tritium.aot.library" {
            b"garbage".to_vec()
        } else {
            v.clone()
        };
        forged.insert(k.clone(), v).unwrap();
    }
    let err = AotOpBuilder::from_package(&forged.encode(), no_compiler("package-bad"))
        .unwrap()
        .build()
        .unwrap_err();
    assert!(matches!(err, AotError::LoadFailed { .. }), "{err}");
}
