#!/usr/bin/env python3
"""A CUDA 13.0 toolkit from PyPI's wheels, for builds that link CUDA at build time.

    python3 scripts/cuda_toolkit.py [--env]

Tritium itself needs no CUDA toolkit (libcuda is loaded at run time). candle's `cuda`
feature (`tritium-candle --features cuda`) does: its kernels are compiled with `nvcc` when
candle-kernels builds, and cudarc links libcuda, cuBLAS, cuRAND and NVRTC at build time.
This installs CUDA 13.0's `nvcc` (with NVVM, the CRT headers, CCCL and the runtime), the
libraries candle links and a stub `libcuda.so` (soname `libcuda.so.1`, the driver's, as
the toolkit's own `lib64/stubs` has) into target/gpu-tools/cuda-13.0 (once: a stamp file
records the pins), so that a machine without CUDA builds the feature. 13.0, not the
newest: its PTX (ISA 9.0) is what driver 580, the H100 run's, loads; and the libraries'
sonames (`libcublas.so.13`, …) are those a CUDA 13.0 machine has.

`--env` prints the `export` lines a build needs (`CUDA_PATH`, `NVCC`, `PATH`,
`LIBRARY_PATH`, `CUDA_COMPUTE_CAP`); `scripts/dev candle-cuda` evaluates them.
"""
import json
import re
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLKIT = ROOT / "target" / "gpu-tools" / "cuda-13.0"
PIP_VENV = ROOT / "target" / "gpu-tools" / "pip-venv"
# CUDA 13.0's wheels (checked with `pip index versions`): nvcc and what it runs (cicc in
# nvvm, crt and CCCL headers, cuda_runtime.h), the libraries cudarc links for candle.
PINS = {
    "nvidia-cuda-nvcc": "13.0.88",
    "nvidia-nvvm": "13.0.88",
    "nvidia-cuda-crt": "13.0.88",
    "nvidia-cuda-cccl": "13.0.85",
    "nvidia-cuda-runtime": "13.0.96",
    "nvidia-cuda-nvrtc": "13.0.88",
    "nvidia-cublas": "13.0.2.14",
    "nvidia-curand": "10.4.0.35",
}
# candle-kernels' PTX and static kernels: compute 8.0, which later GPUs (sm_90) JIT.
COMPUTE_CAP = "80"


def cuda_root():
    return TOOLKIT / "nvidia" / "cu13"


def pip():
    """A pip to install with (a venv of its own: the system Python may have none)."""
    python = PIP_VENV / "bin" / "python"
    if not python.exists():
        venv.create(PIP_VENV, with_pip=True)
    return python


def link_names(lib):
    """`libX.so` beside each `libX.so.N` (the name the linker looks for)."""
    for f in lib.glob("lib*.so.*"):
        m = re.fullmatch(r"(lib[A-Za-z]+)\.so\.\d+", f.name)
        if m:
            link = lib / f"{m.group(1)}.so"
            if not link.exists():
                link.symlink_to(f.name)


def libcuda_stub(root):
    """lib/stubs/libcuda.so: every `cu*` name in cuda.h as an empty function, soname
    `libcuda.so.1`, for the linker only (the driver's library is loaded at run time)."""
    header = (root / "include" / "cuda.h").read_text()
    names = sorted(set(re.findall(r"\bcu[A-Z]\w*", header)))
    stubs = root / "lib" / "stubs"
    stubs.mkdir(exist_ok=True)
    source = stubs / "libcuda_stub.c"
    source.write_text("".join(f"void {n}(void) {{}}\n" for n in names))
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(stubs / "libcuda.so"),
                    "-Wl,-soname,libcuda.so.1", str(source)], check=True)


def ensure():
    stamp = TOOLKIT / "tritium-cuda-toolkit.json"
    want = {"pins": PINS}
    if stamp.exists():
        try:
            if json.loads(stamp.read_text()) == want:
                return cuda_root()
        except ValueError:
            pass
    print(f"cuda_toolkit: installing CUDA 13.0's wheels into {TOOLKIT} (once)",
          file=sys.stderr, flush=True)
    subprocess.run([str(pip()), "-m", "pip", "install", "--no-deps", "--upgrade",
                    "--disable-pip-version-check", "--target", str(TOOLKIT),
                    *[f"{k}=={v}" for k, v in PINS.items()]], check=True, stdout=sys.stderr)
    root = cuda_root()
    link_names(root / "lib")
    libcuda_stub(root)
    stamp.write_text(json.dumps(want) + "\n")
    return root


def main():
    root = ensure()
    if "--env" in sys.argv[1:]:
        lib = root / "lib"
        print(f"export CUDA_PATH={root}")
        print(f"export NVCC={root / 'bin' / 'nvcc'}")
        print(f"export PATH={root / 'bin'}:$PATH")
        print(f"export LIBRARY_PATH={lib}:{lib / 'stubs'}${{LIBRARY_PATH:+:$LIBRARY_PATH}}")
        print(f"export CUDA_COMPUTE_CAP={COMPUTE_CAP}")
    else:
        print(root)


if __name__ == "__main__":
    main()
