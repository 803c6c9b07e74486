#!/usr/bin/python3
# gpu_check.py: the GPU half of gpu-stack-check, which runs it. Python 3
# ctypes only (python3.6 on Ubuntu 18.04 and later): nothing to compile.
#
# Loads NCCL and cuDNN through the links the frameworks use, compares their
# own versions with the packages' and cuDNN's header, creates a cuDNN handle
# and runs one small convolution on every visible GPU, and one NCCL
# all-reduce across all of them in one process (ncclCommInitAll, device
# buffers), its result checked. Prints ok/PROBLEM lines as gpu-stack-check
# does. Exit: 0 passed, 1 a problem, 3 no driver or no GPU.
import argparse
import ctypes
import os
import subprocess
import sys
import time

# The oldest driver each CUDA release runs on (NVIDIA's CUDA release notes,
# table 3, Linux x86_64): `--cuda X.Y` against the driver's version.
MIN_DRIVER = {
    "10.0": "410.48", "10.1": "418.39", "10.2": "440.33",
    "11.0": "450.36.06", "11.1": "455.23", "11.2": "460.27.03",
    "12.0": "525.60.13", "13.0": "580.65.06",
}

problems = 0


def ok(text):
    print("ok:      " + text)


def note(text):
    print("note:    " + text)


def fail(text, fix):
    global problems
    problems += 1
    print("PROBLEM: " + text)
    print("         fix: " + fix)


def numeric(version):
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def driver_version():
    """The kernel module's version, from /proc/driver/nvidia/version."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            for word in f.read().split():
                if word.count(".") >= 1 and word.replace(".", "").isdigit():
                    return word
    except OSError:
        pass
    return None


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def loaded_from(lib, symbol):
    """The file the dynamic loader mapped `lib` from, by dladdr on one of
    its functions (no /proc needed)."""
    try:
        dladdr = ctypes.CDLL(None).dladdr
    except AttributeError:
        dladdr = ctypes.CDLL("libdl.so.2").dladdr
    info = DlInfo()
    if dladdr(ctypes.cast(getattr(lib, symbol), ctypes.c_void_p), ctypes.byref(info)) == 0:
        return None
    return os.path.realpath(info.dli_fname.decode())


def by_name_resolves_to(soname, symbol):
    """What a framework gets when it loads `soname` by name (as dlopen does,
    with this environment's LD_LIBRARY_PATH), in a fresh process."""
    code = ("import sys\n"
            "sys.dont_write_bytecode = True\n"
            "sys.path.insert(0, sys.argv[3])\n"
            "import ctypes, gpu_check\n"
            "print(gpu_check.loaded_from(ctypes.CDLL(sys.argv[1]), sys.argv[2]))\n")
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.check_output([sys.executable, "-c", code, soname, symbol, here],
                                      stderr=subprocess.DEVNULL)
        return out.decode().strip() or None
    except (subprocess.CalledProcessError, OSError):
        return None


def check_loaded(what, lib, link, soname, symbol, package):
    """The library loaded through `link` is the file the link names, and a
    load by soname gets the same file (no stale copy, no LD_LIBRARY_PATH)."""
    want = os.path.realpath(link)
    got = loaded_from(lib, symbol)
    if got != want:
        fail("%s loaded through %s is %s, not %s" % (what, link, got, want),
             "sudo apt-get install --reinstall " + package)
    by_name = by_name_resolves_to(soname, symbol)
    if by_name and by_name != want:
        hint = "unset LD_LIBRARY_PATH" if os.environ.get("LD_LIBRARY_PATH") else \
            "remove the stale copy, then: sudo ldconfig"
        fail("%s by name resolves to %s, not the lab's %s (LD_LIBRARY_PATH=%s)"
             % (soname, by_name, want, os.environ.get("LD_LIBRARY_PATH", "")), hint)
    elif by_name:
        ok("%s by name resolves to %s" % (soname, want))
    else:
        fail("%s cannot be loaded by name" % soname, "sudo ldconfig")


class Cuda(object):
    """The CUDA runtime the lab uses: /usr/local/cuda's, else the linker's."""

    def __init__(self):
        self.lib = None
        candidates = []
        lib64 = "/usr/local/cuda/lib64"
        if os.path.isdir(lib64):
            candidates += sorted(os.path.join(lib64, f) for f in os.listdir(lib64)
                                 if f.startswith("libcudart.so."))
        candidates.append("libcudart.so")
        for c in candidates:
            try:
                self.lib = ctypes.CDLL(c)
                self.path = c
                break
            except OSError:
                continue

    def call(self, name, *args):
        status = getattr(self.lib, name)(*args)
        if status != 0:
            raise RuntimeError("%s returned CUDA error %d" % (name, status))

    def malloc(self, size):
        p = ctypes.c_void_p()
        self.call("cudaMalloc", ctypes.byref(p), ctypes.c_size_t(size))
        return p

    def to_device(self, dst, src, size):
        self.call("cudaMemcpy", dst, ctypes.c_void_p(src), ctypes.c_size_t(size), 1)

    def to_host(self, dst, src, size):
        self.call("cudaMemcpy", ctypes.c_void_p(dst), src, ctypes.c_size_t(size), 2)


def check_nvcc(args):
    """The toolkit /usr/local/cuda points at, as `nvcc --version` says."""
    nvcc = "/usr/local/cuda/bin/nvcc"
    if not args.cuda or not os.path.exists(nvcc):
        return
    try:
        out = subprocess.check_output([nvcc, "--version"], stderr=subprocess.STDOUT).decode()
    except (subprocess.CalledProcessError, OSError) as e:
        fail("%s --version failed: %s" % (nvcc, e), "reinstall the CUDA %s toolkit" % args.cuda)
        return
    release = out.split("release ")[1].split(",")[0] if "release " in out else "?"
    if release != args.cuda:
        fail("%s is CUDA %s, the stack is built for CUDA %s" % (nvcc, release, args.cuda),
             "point /usr/local/cuda at the CUDA %s install (sudo update-alternatives --config cuda)"
             % args.cuda)
    else:
        ok("nvcc --version: CUDA %s (%s)" % (release, os.path.realpath(nvcc)))


def check_driver(args, cuda):
    drv = driver_version()
    if drv:
        ok("NVIDIA driver %s" % drv)
    if args.cuda and args.cuda in MIN_DRIVER and drv:
        need = MIN_DRIVER[args.cuda]
        if numeric(drv) >= numeric(need):
            ok("driver %s runs CUDA %s (needs %s or later)" % (drv, args.cuda, need))
        else:
            fail("driver %s is older than CUDA %s needs (%s or later)" % (drv, args.cuda, need),
                 "install NVIDIA driver %s or later (e.g. sudo apt-get install nvidia-driver-%s)"
                 % (need, need.split(".")[0]))
    if cuda.lib is None:
        fail("no CUDA runtime (libcudart) under /usr/local/cuda/lib64 or on the linker's path",
             "install the CUDA %s toolkit or runtime (cuda-cudart-%s)"
             % (args.cuda or "", (args.cuda or "X-Y").replace(".", "-")))
        return 0
    rt = ctypes.c_int()
    cuda.call("cudaRuntimeGetVersion", ctypes.byref(rt))
    rtv = "%d.%d" % (rt.value // 1000, (rt.value % 1000) // 10)
    if args.cuda and rtv != args.cuda:
        fail("the CUDA runtime %s is %s, the stack is built for CUDA %s" % (cuda.path, rtv, args.cuda),
             "point /usr/local/cuda at the CUDA %s install (sudo update-alternatives --config cuda)"
             % args.cuda)
    else:
        ok("CUDA runtime %s (%s)" % (rtv, cuda.path))
    check_nvcc(args)
    n = ctypes.c_int()
    status = cuda.lib.cudaGetDeviceCount(ctypes.byref(n))
    if cuda.lib is None or status != 0 or n.value == 0:
        note("the driver sees no GPU (cudaGetDeviceCount: status %d, %d devices)" % (status, n.value))
        return 0
    names = []
    for i in range(n.value):
        # cudaDeviceProp starts with char name[256]; CUDA 12 renamed the call.
        prop = ctypes.create_string_buffer(8192)
        name = "GPU %d" % i
        for call in ("cudaGetDeviceProperties_v2", "cudaGetDeviceProperties"):
            fn = getattr(cuda.lib, call, None)
            if fn is not None and fn(prop, i) == 0:
                name = prop.raw[:256].split(b"\0")[0].decode(errors="replace")
                break
        names.append(name)
    ok("%d GPU(s): %s" % (n.value, ", ".join(names)))
    return n.value


def check_nccl(args, cuda, ndev):
    try:
        nccl = ctypes.CDLL(args.nccl)
    except OSError as e:
        fail("cannot load NCCL through %s: %s" % (args.nccl, e),
             "sudo dpkg-reconfigure %s" % args.nccl_package)
        return
    check_loaded("NCCL", nccl, args.nccl, "libnccl.so.2", "ncclGetVersion", args.nccl_package)
    v = ctypes.c_int()
    nccl.ncclGetVersion(ctypes.byref(v))
    # major*10000 + minor*100 + patch since 2.9; major*1000 + minor*100 + patch before.
    code = v.value
    got = "%d.%d.%d" % ((code // 10000, code % 10000 // 100, code % 100) if code >= 20900
                        else (code // 1000, code % 1000 // 100, code % 100))
    if args.nccl_version and got != args.nccl_version:
        fail("ncclGetVersion() = %d (NCCL %s), the package is %s" % (code, got, args.nccl_version),
             "sudo apt-get install --reinstall " + args.nccl_package)
    else:
        ok("ncclGetVersion() = %d (NCCL %s)" % (code, got))
    if ndev == 0:
        return
    comms = (ctypes.c_void_p * ndev)()
    devs = (ctypes.c_int * ndev)(*range(ndev))
    t = time.time()
    status = nccl.ncclCommInitAll(comms, ndev, devs)
    init_ms = (time.time() - t) * 1000
    if status != 0:
        nccl.ncclGetErrorString.restype = ctypes.c_char_p
        fail("ncclCommInitAll over %d GPU(s): %s" % (ndev, nccl.ncclGetErrorString(status).decode()),
             "check the driver (nvidia-smi) and NCCL_DEBUG=INFO gpu-stack-check --gpu")
        return
    ok("ncclCommInitAll over %d GPU(s) in %.0f ms" % (ndev, init_ms))
    count = 16 * 1024 * 1024  # 64 MB of float32
    size = count * 4
    import array
    send, recv = [], []
    for i in range(ndev):
        cuda.call("cudaSetDevice", i)
        s, r = cuda.malloc(size), cuda.malloc(size)
        host = array.array("f", [float(i + 1)]) * count
        cuda.to_device(s, host.buffer_info()[0], size)
        send.append(s)
        recv.append(r)

    def all_reduce():
        nccl.ncclGroupStart()
        for i in range(ndev):
            st = nccl.ncclAllReduce(send[i], recv[i], ctypes.c_size_t(count), 7, 0,
                                    ctypes.c_void_p(comms[i]), ctypes.c_void_p(0))
            if st != 0:
                return st
        st = nccl.ncclGroupEnd()
        for i in range(ndev):
            cuda.call("cudaSetDevice", i)
            cuda.call("cudaDeviceSynchronize")
        return st

    status = all_reduce()  # the first one sets up NCCL's buffers
    rounds = 5
    t = time.time()
    for _ in range(rounds):
        status = status or all_reduce()
    secs = (time.time() - t) / rounds
    if status != 0:
        fail("ncclAllReduce: status %d" % status, "NCCL_DEBUG=INFO gpu-stack-check --gpu")
    else:
        want = float(ndev * (ndev + 1) // 2)
        bad = []
        for i in range(ndev):
            cuda.call("cudaSetDevice", i)
            out = array.array("f", [0.0]) * 4
            cuda.to_host(out.buffer_info()[0], recv[i], 16)
            tail = array.array("f", [0.0]) * 4
            cuda.to_host(tail.buffer_info()[0], ctypes.c_void_p(recv[i].value + size - 16), 16)
            if any(x != want for x in list(out) + list(tail)):
                bad.append("GPU %d: %s" % (i, list(out)))
        if bad:
            fail("ncclAllReduce gave a wrong sum (want %s): %s" % (want, "; ".join(bad)),
                 "NCCL_DEBUG=INFO gpu-stack-check --gpu; check the GPUs with nvidia-smi")
        else:
            algbw = size / secs / 1e9
            busbw = algbw * 2 * (ndev - 1) / ndev if ndev > 1 else algbw
            ok("ncclAllReduce of 64 MB float32 over %d GPU(s): sum %s right; %.2f ms, "
               "algbw %.1f GB/s, busbw %.1f GB/s" % (ndev, want, secs * 1000, algbw, busbw))
    for i in range(ndev):
        cuda.call("cudaSetDevice", i)
        cuda.lib.cudaFree(send[i])
        cuda.lib.cudaFree(recv[i])
        nccl.ncclCommDestroy(ctypes.c_void_p(comms[i]))


def check_cudnn(args, cuda, ndev):
    try:
        cudnn = ctypes.CDLL(args.cudnn)
    except OSError as e:
        fail("cannot load cuDNN through %s: %s" % (args.cudnn, e),
             "sudo dpkg-reconfigure %s" % args.cudnn_package)
        return
    check_loaded("cuDNN", cudnn, args.cudnn, os.path.basename(args.cudnn), "cudnnGetVersion",
                 args.cudnn_package)
    cudnn.cudnnGetVersion.restype = ctypes.c_size_t
    code = cudnn.cudnnGetVersion()
    # cuDNN 9: major*10000 + minor*100 + patch; before: major*1000 + minor*100 + patch.
    got = "%d.%d.%d" % ((code // 10000, code % 10000 // 100, code % 100) if code >= 90000
                        else (code // 1000, code % 1000 // 100, code % 100))
    header = None
    if args.cudnn_header:
        defs = {}
        with open(args.cudnn_header) as f:
            for line in f:
                w = line.split()
                if len(w) >= 3 and w[0] == "#define" and w[1] in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
                    defs[w[1]] = w[2]
        header = "%s.%s.%s" % (defs.get("CUDNN_MAJOR"), defs.get("CUDNN_MINOR"), defs.get("CUDNN_PATCHLEVEL"))
    if args.cudnn_version and got != args.cudnn_version:
        fail("cudnnGetVersion() = %d (cuDNN %s), the package is %s" % (code, got, args.cudnn_version),
             "sudo apt-get install --reinstall " + args.cudnn_package)
    elif header and header != got:
        fail("cudnnGetVersion() = %d (cuDNN %s), %s says %s" % (code, got, args.cudnn_header, header),
             "sudo apt-get install --reinstall the package of %s" % args.cudnn_header)
    else:
        ok("cudnnGetVersion() = %d (cuDNN %s), as the package%s says"
           % (code, got, " and %s" % args.cudnn_header if header else ""))
    c_int, p = ctypes.c_int, ctypes.c_void_p
    for i in range(ndev):
        cuda.call("cudaSetDevice", i)
        h = p()
        st = cudnn.cudnnCreate(ctypes.byref(h))
        if st != 0:
            cudnn.cudnnGetErrorString.restype = ctypes.c_char_p
            fail("cudnnCreate on GPU %d: %s" % (i, cudnn.cudnnGetErrorString(st).decode()),
                 "check the driver and CUDA runtime above; sudo apt-get install --reinstall " + args.cudnn_package)
            continue
        # A 1x1x5x5 input of ones, a 1x1x3x3 filter of ones, no padding:
        # every output element is 9.
        x, w, y, conv = p(), p(), p(), p()
        steps = [
            cudnn.cudnnCreateTensorDescriptor(ctypes.byref(x)),
            cudnn.cudnnSetTensor4dDescriptor(x, 0, 0, 1, 1, 5, 5),
            cudnn.cudnnCreateFilterDescriptor(ctypes.byref(w)),
            cudnn.cudnnSetFilter4dDescriptor(w, 0, 0, 1, 1, 3, 3),
            cudnn.cudnnCreateTensorDescriptor(ctypes.byref(y)),
            cudnn.cudnnSetTensor4dDescriptor(y, 0, 0, 1, 1, 3, 3),
            cudnn.cudnnCreateConvolutionDescriptor(ctypes.byref(conv)),
            cudnn.cudnnSetConvolution2dDescriptor(conv, 0, 0, 1, 1, 1, 1, 1, 0),
        ]
        import array
        ones = array.array("f", [1.0]) * 25
        dx, dw, dy = cuda.malloc(100), cuda.malloc(36), cuda.malloc(36)
        cuda.to_device(dx, ones.buffer_info()[0], 100)
        cuda.to_device(dw, ones.buffer_info()[0], 36)
        ws = ctypes.c_size_t()
        steps.append(cudnn.cudnnGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, 0, ctypes.byref(ws)))
        dws = cuda.malloc(max(ws.value, 1))
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        steps.append(cudnn.cudnnConvolutionForward(h, ctypes.byref(alpha), x, dx, w, dw, conv, 0,
                                                   dws, ctypes.c_size_t(ws.value),
                                                   ctypes.byref(beta), y, dy))
        cuda.call("cudaDeviceSynchronize")
        out = array.array("f", [0.0]) * 9
        cuda.to_host(out.buffer_info()[0], dy, 36)
        if any(s != 0 for s in steps) or list(out) != [9.0] * 9:
            fail("cuDNN convolution on GPU %d: statuses %s, output %s (want nine 9.0)" % (i, steps, list(out)),
                 "sudo apt-get install --reinstall " + args.cudnn_package)
        else:
            ok("cudnnCreate and a 3x3 convolution forward on GPU %d: right result" % i)
        for d in (dx, dw, dy, dws):
            cuda.lib.cudaFree(d)
        cudnn.cudnnDestroyTensorDescriptor(x)
        cudnn.cudnnDestroyTensorDescriptor(y)
        cudnn.cudnnDestroyFilterDescriptor(w)
        cudnn.cudnnDestroyConvolutionDescriptor(conv)
        cudnn.cudnnDestroy(h)


def main():
    ap = argparse.ArgumentParser(description="the GPU checks of gpu-stack-check")
    ap.add_argument("--package", default="the stack's metapackage")
    ap.add_argument("--nccl")
    ap.add_argument("--nccl-version")
    ap.add_argument("--nccl-package", default="libnccl2")
    ap.add_argument("--cudnn")
    ap.add_argument("--cudnn-version")
    ap.add_argument("--cudnn-package", default="the cuDNN runtime package")
    ap.add_argument("--cudnn-header")
    ap.add_argument("--cuda", help="the CUDA release the stack is built for (X.Y)")
    args = ap.parse_args()
    t = time.time()
    cuda = Cuda()
    try:
        # The libraries' own versions need no GPU; the work on them does.
        ndev = check_driver(args, cuda)
        if args.nccl:
            check_nccl(args, cuda, ndev)
        if args.cudnn:
            check_cudnn(args, cuda, ndev)
    except (RuntimeError, AttributeError, OSError) as e:
        fail(str(e), "check the driver (nvidia-smi) and the CUDA runtime above")
        ndev = ndev if "ndev" in locals() else 0
    if problems:
        return 1
    if ndev == 0:
        return 3
    ok("GPU checks took %.1f s" % (time.time() - t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
