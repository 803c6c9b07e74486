//! gpu-stack-check's GPU half (gpu_check.py, Python 3 ctypes) where there is
//! no GPU: on Ubuntu 18.04's python3.6, with the stack installed from the
//! shipped recipes. With no driver it says so and passes on the file checks
//! (`--gpu`: exit 3). With a driver but no GPU (stand-in libcuda and
//! libcudart) it still loads NCCL and cuDNN through the links and checks
//! their own versions (the stand-ins' `ncclGetVersion`/`cudnnGetVersion`
//! answer as the real ones do), and names a stale copy that
//! LD_LIBRARY_PATH puts in front. The GPU work itself runs on a real GPU:
//! tests/gpu/run.sh.

use std::fs;

use crate::stack::{pool, shipped_build};
use crate::support::chroot::{Chroot, Dist};
use crate::support::standin::{nccl_lib, shared_lib_with};

#[test]
fn gpu_stack_check_without_a_gpu_on_python_3_6() {
    let (_lab, out) = shipped_build();
    let c = Chroot::of(Dist::BionicCares);
    assert!(c.ok("python3 --version 2>&1").starts_with("Python 3.6."));
    let mut files = Vec::new();
    for (dir, f) in [
        (
            "libc/libcudnn7",
            "libcudnn7_7.5.0.56-1+cuda10.1+debforge1_amd64.deb",
        ),
        (
            "libc/libcudnn7-dev",
            "libcudnn7-dev_7.5.0.56-1+cuda10.1+debforge1_amd64.deb",
        ),
        (
            "libn/libnccl2",
            "libnccl2_2.4.2-1+cuda10.1+debforge1_amd64.deb",
        ),
        (
            "libn/libnccl-dev",
            "libnccl-dev_2.4.2-1+cuda10.1+debforge1_amd64.deb",
        ),
        (
            "libc/libc-ares-dev",
            "libc-ares-dev_1.14.0-1ubuntu0.2_amd64.deb",
        ),
        ("g/gpu-stack-cu101", "gpu-stack-cu101_1.0-1_all.deb"),
    ] {
        files.push(c.put(&pool(&out, dir, f)));
    }
    c.ok(&format!("dpkg -i {} 2>&1", files.join(" ")));

    // No driver: the file checks, and a note.
    let report = c.ok("gpu-stack-check");
    assert!(
        report.contains("note:    no NVIDIA driver (no /proc/driver/nvidia, no libcuda.so.1): the GPU checks did not run\n")
            && report.ends_with("gpu-stack-check: all checks passed\n"),
        "{report}"
    );
    let (code, report) = c.run("gpu-stack-check --gpu");
    assert_eq!(code, 3, "{report}");
    assert!(
        report.ends_with(
            "gpu-stack-check: the file checks passed; no GPU checks (no NVIDIA driver or GPU)\n"
        ),
        "{report}"
    );
    let (code, report) = c.run("gpu-stack-check --files");
    assert_eq!(code, 0, "{report}");
    assert!(!report.contains("NVIDIA driver"), "{report}");
    let (code, report) = c.run("gpu-stack-check --bogus");
    assert_eq!(code, 2, "{report}");

    // A driver (libcuda.so.1) and the CUDA 10.1 runtime, but no GPU.
    let lib = c.path("/usr/lib/x86_64-linux-gnu/libcuda.so.1");
    fs::write(&lib, shared_lib_with("libcuda.so.1", "")).unwrap();
    let cudart = shared_lib_with(
        "libcudart.so.10.1",
        "int cudaRuntimeGetVersion(int *v) { *v = 10010; return 0; }\n\
         int cudaGetDeviceCount(int *n) { *n = 0; return 100; }",
    );
    fs::write(c.path("/usr/local/cuda/lib64/libcudart.so.10.1"), cudart).unwrap();
    c.ok("ldconfig");
    let report = c.ok("gpu-stack-check");
    for line in [
        "ok:      CUDA runtime 10.1 (/usr/local/cuda/lib64/libcudart.so.10.1)\n",
        "note:    the driver sees no GPU (cudaGetDeviceCount: status 100, 0 devices)\n",
        "ok:      ncclGetVersion() = 2402 (NCCL 2.4.2)\n",
        "ok:      libnccl.so.2 by name resolves to /usr/lib/x86_64-linux-gnu/libnccl.so.2.4.2\n",
        "ok:      cudnnGetVersion() = 7500 (cuDNN 7.5.0), as the package and /usr/include/cudnn.h says\n",
        "ok:      libcudnn.so.7 by name resolves to /usr/lib/x86_64-linux-gnu/libcudnn.so.7.5.0\n",
    ] {
        assert!(report.contains(line), "{line}: {report}");
    }
    assert!(
        report.ends_with("gpu-stack-check: all checks passed\n"),
        "{report}"
    );
    let (code, report) = c.run("gpu-stack-check --gpu");
    assert_eq!(code, 3, "{report}");

    // A stale NCCL that LD_LIBRARY_PATH puts in front of the lab's.
    fs::create_dir_all(c.path("/opt/old")).unwrap();
    fs::write(c.path("/opt/old/libnccl.so.2"), nccl_lib("2.3.7")).unwrap();
    let (code, report) = c.run("LD_LIBRARY_PATH=/opt/old gpu-stack-check");
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("PROBLEM: libnccl.so.2 by name resolves to /opt/old/libnccl.so.2, not the lab's /usr/lib/x86_64-linux-gnu/libnccl.so.2.4.2 (LD_LIBRARY_PATH=/opt/old)\n         fix: unset LD_LIBRARY_PATH\n"),
        "{report}"
    );

    // The runtime of another CUDA release.
    let other = shared_lib_with(
        "libcudart.so.10.1",
        "int cudaRuntimeGetVersion(int *v) { *v = 10000; return 0; }\n\
         int cudaGetDeviceCount(int *n) { *n = 0; return 100; }",
    );
    fs::write(c.path("/usr/local/cuda/lib64/libcudart.so.10.1"), other).unwrap();
    let (code, report) = c.run("gpu-stack-check");
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains("PROBLEM: the CUDA runtime /usr/local/cuda/lib64/libcudart.so.10.1 is 10.0, the stack is built for CUDA 10.1\n"),
        "{report}"
    );
}
