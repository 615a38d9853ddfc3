"""nnasm from Python: a ctypes binding over the C API (api/nnasm.h) of libnnasm.so.

    import numpy as np, nnasm
    with nnasm.Model("infer.nnm") as m:
        print(m.inputs, m.outputs)
        probs = m.run({"x": np.zeros((1, 784), np.float32)})["probs"]

The library is found at $NNASM_LIBRARY, else next to this file, else in the repository's build/,
else on the system's library path. Errors are raised as nnasm.Error with the C API's status and
message. docs/python.md describes the binding.
"""

import ctypes
import ctypes.util
import os
from collections import namedtuple

import numpy as np

__all__ = ["Model", "Error", "TensorInfo", "library"]

# ---------------------------------------------------------------------------------------------
# The C ABI, mirrored in ONE place: api/nnasm.h's structs and function signatures. When the header
# changes (struct sizes, int32 enums, new fields), this block is all that changes.
# ---------------------------------------------------------------------------------------------

MAX_RANK = 6
_STATUS_OK = 0
_DTYPES = {0: np.dtype(np.float32), 1: np.dtype(np.int32), 3: np.dtype(np.int8), 4: np.dtype(np.uint8)}  # nnasm_dtype -> numpy


class _TensorInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set before each call: the library fills this far
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),  # nnasm_dtype
        ("rank", ctypes.c_int32),
        ("dims", ctypes.c_int64 * MAX_RANK),
        ("bytes", ctypes.c_size_t),
        ("buffer_bytes", ctypes.c_size_t),
    ]


class _ModelOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("threads", ctypes.c_int),
        ("isa", ctypes.c_char_p),
        ("jit", ctypes.c_int),
        ("log", ctypes.c_void_p),
        ("log_user", ctypes.c_void_p),
        ("alloc", ctypes.c_void_p),
        ("free", ctypes.c_void_p),
        ("alloc_user", ctypes.c_void_p),
        ("parallel_for", ctypes.c_void_p),
        ("parallel_user", ctypes.c_void_p),
        ("log_level", ctypes.c_int32),  # nnasm_log_level
    ]


_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_SIZE = ctypes.c_size_t
_STATUS = ctypes.c_int  # nnasm_status
# name: (restype, argtypes)
_PROTOTYPES = {
    "nnasm_version": (ctypes.c_char_p, []),
    "nnasm_abi_version": (ctypes.c_uint32, []),
    "nnasm_status_string": (ctypes.c_char_p, [_STATUS]),
    "nnasm_last_error": (ctypes.c_char_p, []),
    "nnasm_model_options_init_sized": (None, [ctypes.POINTER(_ModelOptions), _SIZE]),
    "nnasm_model_load_file": (_STATUS, [ctypes.c_char_p, ctypes.POINTER(_ModelOptions), _PP]),
    "nnasm_model_load_memory": (_STATUS, [ctypes.c_void_p, _SIZE, ctypes.POINTER(_ModelOptions), _PP]),
    "nnasm_model_free": (None, [_P]),
    "nnasm_model_input_count": (_STATUS, [_P, ctypes.POINTER(_SIZE)]),
    "nnasm_model_output_count": (_STATUS, [_P, ctypes.POINTER(_SIZE)]),
    "nnasm_instance_create": (_STATUS, [_P, _PP]),
    "nnasm_instance_free": (None, [_P]),
    "nnasm_instance_tensor_data": (_STATUS, [_P, ctypes.c_char_p, _PP, ctypes.POINTER(_SIZE)]),
    "nnasm_instance_run": (_STATUS, [_P]),
    "nnasm_instance_reset_state": (_STATUS, [_P]),
    "nnasm_instance_set_batch": (_STATUS, [_P, ctypes.c_int64]),
    "nnasm_instance_input_info": (_STATUS, [_P, _SIZE, ctypes.POINTER(_TensorInfo)]),
    "nnasm_instance_output_info": (_STATUS, [_P, _SIZE, ctypes.POINTER(_TensorInfo)]),
}

# ---------------------------------------------------------------------------------------------

# Status codes this module raises itself (the C API's numbers for the same kinds of mistake).
_ERR_INVALID_ARGUMENT = 1
_ERR_NOT_FOUND = 2
_ERR_SIZE_MISMATCH = 3


class Error(Exception):
    """A failure of nnasm: `status` is the C API's nnasm_status (an int), `status_name` its text
    ("not found"), `message` what nnasm_last_error() said (or what this binding found wrong)."""

    def __init__(self, status, message, status_name=""):
        super().__init__(f"{message} ({status_name})" if status_name else message)
        self.status = status
        self.status_name = status_name
        self.message = message


TensorInfo = namedtuple("TensorInfo", ["name", "shape", "dtype"])
TensorInfo.__doc__ = "An input or output: its name, shape (a tuple) and numpy dtype (float32, int32, int8 or uint8)."

_lib = None


def _candidates():
    env = os.environ.get("NNASM_LIBRARY")
    if env:
        return [env]  # an explicit choice is never second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, "libnnasm.so"), os.path.join(os.path.dirname(here), "build", "libnnasm.so")]
    system = ctypes.util.find_library("nnasm")
    return [p for p in found if os.path.exists(p)] + [system or "libnnasm.so"]


def library():
    """The loaded libnnasm (a ctypes.CDLL), loading it on first use."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        _lib = lib
        return lib
    raise Error(_ERR_NOT_FOUND, "cannot load libnnasm.so (set NNASM_LIBRARY to its path; `make build/libnnasm.so` "
                "builds it): " + "; ".join(tried), "not found")


def _check(status):
    if status != _STATUS_OK:
        lib = library()
        raise Error(status, lib.nnasm_last_error().decode("utf-8", "replace"),
                    lib.nnasm_status_string(status).decode())


def _infos(model, count_fn, instance, info_fn):
    n = _SIZE()
    _check(count_fn(model, ctypes.byref(n)))
    out = []
    for i in range(n.value):
        info = _TensorInfo()
        info.struct_size = ctypes.sizeof(info)
        _check(info_fn(instance, i, ctypes.byref(info)))
        out.append(TensorInfo(info.name.decode(), tuple(info.dims[: info.rank]), _DTYPES[info.dtype]))
    return out


class Model:
    """A loaded model with one instance to run it. Not thread-safe: use one Model per thread (each
    loads its own copy), or lock around run().

    `threads`: threads for one run's big steps (default 1). `isa`: "avx512", "avx2" or "ref" caps
    the generated kernels' level (default: NNASM_ISA, else the CPU's best). `batch`: runs the
    model at that batch size instead of the one it was saved with (see set_batch)."""

    def __init__(self, path=None, threads=None, isa=None, batch=None, *, _data=None):
        lib = library()
        self._model = ctypes.c_void_p()
        self._instance = ctypes.c_void_p()
        opts = _ModelOptions()
        lib.nnasm_model_options_init_sized(ctypes.byref(opts), ctypes.sizeof(opts))
        if threads is not None:
            opts.threads = int(threads)
        isa_bytes = None if isa is None else str(isa).encode()
        opts.isa = isa_bytes  # kept alive by isa_bytes until the load returns
        if _data is None:
            _check(lib.nnasm_model_load_file(os.fsencode(path), ctypes.byref(opts), ctypes.byref(self._model)))
        else:
            buf = ctypes.create_string_buffer(bytes(_data), len(_data))
            _check(lib.nnasm_model_load_memory(buf, len(_data), ctypes.byref(opts), ctypes.byref(self._model)))
        try:
            _check(lib.nnasm_instance_create(self._model, ctypes.byref(self._instance)))
            if batch is not None:
                _check(lib.nnasm_instance_set_batch(self._instance, int(batch)))
            self._refresh()
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_bytes(cls, data, threads=None, isa=None, batch=None):
        """A model from the bytes of a model file (.nnm) or a listing."""
        return cls(None, threads, isa, batch, _data=data)

    def set_batch(self, batch):
        """Runs the model at batch size `batch` from now on (the leading dimension of every input
        and of the outputs that follow it): inputs and outputs change shape, earlier views from
        run(copy=False) become invalid. Raises nnasm.Error saying why where the model cannot."""
        _check(library().nnasm_instance_set_batch(self._instance, int(batch)))
        self._refresh()

    def _refresh(self):
        lib = library()
        self.inputs = _infos(self._model, lib.nnasm_model_input_count, self._instance, lib.nnasm_instance_input_info)
        self.outputs = _infos(self._model, lib.nnasm_model_output_count, self._instance, lib.nnasm_instance_output_info)
        # The instance's own buffers (valid while it lives), seen as numpy arrays: run() copies
        # inputs into them and reads outputs from them without another copy through the C API.
        self._in_views = {t.name: self._view(t) for t in self.inputs}
        self._out_views = {t.name: self._view(t) for t in self.outputs}

    def _view(self, t):
        ptr, size = ctypes.c_void_p(), _SIZE()
        _check(library().nnasm_instance_tensor_data(self._instance, t.name.encode(), ctypes.byref(ptr), ctypes.byref(size)))
        raw = (ctypes.c_char * size.value).from_address(ptr.value)
        return np.frombuffer(raw, dtype=t.dtype, count=int(np.prod(t.shape, dtype=np.int64))).reshape(t.shape)

    def run(self, feeds, copy=True):
        """Runs once on `feeds` ({input name: array}; every input must be given) and returns
        {output name: array}. Arrays must have the input's shape and dtype (float32, int32, int8 or uint8);
        lists and scalars are converted. With copy=True (the default) the returned arrays own
        their data; with copy=False they are read-only views of the instance's buffers, valid
        until the next run() or close()."""
        if self._instance is None or not self._instance.value:
            raise Error(_ERR_INVALID_ARGUMENT, "the model is closed", "invalid argument")
        for name, value in feeds.items():
            view = self._in_views.get(name)
            if view is None:
                raise Error(_ERR_NOT_FOUND, f"no input named '{name}' (the model's inputs: "
                            f"{', '.join(self._in_views) or 'none'})", "not found")
            arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=view.dtype)
            if arr.dtype != view.dtype:
                raise Error(_ERR_INVALID_ARGUMENT, f"input '{name}' is {view.dtype}, the array is {arr.dtype} "
                            f"(convert it with .astype(np.{view.dtype}))", "invalid argument")
            if arr.shape != view.shape:
                raise Error(_ERR_SIZE_MISMATCH, f"input '{name}' has shape {list(view.shape)}, the array "
                            f"{list(arr.shape)}", "size mismatch")
            np.copyto(view, arr, casting="no")
        missing = [n for n in self._in_views if n not in feeds]
        if missing:
            raise Error(_ERR_INVALID_ARGUMENT, f"input{'s' if len(missing) > 1 else ''} not given: "
                        f"{', '.join(missing)}", "invalid argument")
        _check(library().nnasm_instance_run(self._instance))
        if copy:
            return {name: view.copy() for name, view in self._out_views.items()}
        out = {}
        for name, view in self._out_views.items():
            v = view.view()
            v.flags.writeable = False
            out[name] = v
        return out

    def reset_state(self):
        """Sets the state a run carries to the next (a recurrent layer's h) back to its start."""
        _check(library().nnasm_instance_reset_state(self._instance))

    def close(self):
        """Frees the instance and the model; views from run(copy=False) are invalid afterwards."""
        lib = library()
        if getattr(self, "_instance", None) is not None and self._instance.value:
            lib.nnasm_instance_free(self._instance)
        if getattr(self, "_model", None) is not None and self._model.value:
            lib.nnasm_model_free(self._model)
        self._instance = None
        self._model = None
        self._in_views = {}
        self._out_views = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
