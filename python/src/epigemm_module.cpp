// epigemm._epigemm: the Python extension, a thin layer over the C API (include/epigemm/epigemm.h).
//
// Operands are the caller's arrays themselves (None where not given), read here ("reading
// arrays" below). Every function returns the C status as an int (0 on success); the Python side
// turns a failure into an exception with Context.last_error(), which holds the library's message
// or this layer's (a bad array: its dtype, strides, device). One status is this layer's own:
// kNeedWorkspace, when the caller passed its own workspace and it is smaller than the call needs
// (Context.workspace_needed says how large it must be).
//
// A Context is one epigemm_context_t bound to one device (-1: host only), used by one thread
// (the Python package keeps one per thread and device). Unless the caller passes a workspace, the
// Context owns one: a host byte buffer, or grow-only device memory per stream, allocated here
// outside the library call (the library never allocates).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "epigemm/epigemm.h"
#include "linear_workspace_query.hpp"

#ifdef EPIGEMM_PYTHON_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace nb = nanobind;

namespace {

// The caller's workspace is smaller than the call needs (never a C status: those are >= 0).
constexpr int kNeedWorkspace = -1;

// The activations of the Python API, by code: the values of epigemm_activation_t
// (epigemm/_ops.py's ACTIVATIONS holds the names), passed to epigemm_linear_fprop_act /
// epigemm_linear_dgrad_act as they are.
enum Activation : int { kIdentity = 0, kGeluTanh = 1, kGeluErf = 2, kRelu = 3, kSilu = 4 };

// Every activation of the Python API is computed by the library (kept for the package's
// introspection: epigemm.activation_computed).
bool activation_computed(int activation) { return activation >= kIdentity && activation <= kSilu; }

const char* activation_name(int activation) {
  switch (activation) {
    case kIdentity: return "identity";
    case kGeluTanh: return "gelu_tanh";
    case kGeluErf: return "gelu_erf";
    case kRelu: return "relu";
    case kSilu: return "silu";
  }
  return "invalid activation";
}

// ---- reading arrays ------------------------------------------------------------------------------
// PyTorch tensors are read through their attributes (data_ptr(), dtype, shape, stride(),
// is_cuda, get_device()) and NumPy arrays through the buffer protocol, here in C++: a DLPack
// capsule per tensor costs several times more. Anything else (CuPy, JAX, ml_dtypes' bfloat16 in
// NumPy) goes through the Python package's describe(), registered with set_array_types.

constexpr int kMaxDims = 32;
constexpr int kNoDevice = -2;  // no operand read yet

struct ArrayView {
  void* data = nullptr;
  int dtype = -1;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};  // in elements
  int device = -1;                 // -1: host memory, else the CUDA device
};

struct ArrayTypes {
  nb::object torch_tensor;      // torch.Tensor (its subclasses too)
  nb::object torch_dtypes[3];   // torch.float32, torch.float16, torch.bfloat16 (epigemm_dtype_t order)
  nb::object describe;          // describe(array, name, output) -> (data, dtype, shape, strides, device)
};
ArrayTypes& array_types() {
  static ArrayTypes* types = new ArrayTypes();  // never destroyed: it outlives the interpreter's objects
  return *types;
}

PyObject* interned(const char* text) {
  PyObject* s = PyUnicode_InternFromString(text);
  if (s == nullptr) throw nb::python_error();
  return s;
}

nb::object attribute(PyObject* o, PyObject* name) {
  PyObject* r = PyObject_GetAttr(o, name);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

nb::object call_method(PyObject* o, PyObject* name) {
  PyObject* r = PyObject_CallMethodObjArgs(o, name, nullptr);
  if (r == nullptr) throw nb::python_error();
  return nb::steal(r);
}

std::string text_of(nb::handle h) { return nb::cast<std::string>(nb::str(h)); }

// False where the tuple is longer than kMaxDims (*count says how long) or no tuple (*count -1).
bool read_int_tuple(PyObject* tuple, int64_t* values, int* count) {
  *count = PyTuple_Check(tuple) ? int(PyTuple_GET_SIZE(tuple)) : -1;
  if (*count < 0 || *count > kMaxDims) return false;
  for (int i = 0; i < *count; ++i) values[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
  if (PyErr_Occurred()) throw nb::python_error();
  return true;
}

const char* const kDtypeExpected = "; expected float32, float16 or bfloat16";

// What is wrong with a shape of `dims` dimensions and `strides` strides that was not read.
std::string shape_error(const char* name, int dims, int strides) {
  if (dims > kMaxDims || strides > kMaxDims) {
    return std::string(name) + " has " + std::to_string(std::max(dims, strides)) + " dimensions; expected at most " +
           std::to_string(kMaxDims);
  }
  return std::string(name) + " has a shape of " + std::to_string(dims) + " dimensions and " + std::to_string(strides) +
         " strides; expected one stride per dimension";
}

// The operands of one call: reads each, checks they share one device, and says what is wrong.
// It also holds what keeps their memory valid until the call is done (it is destroyed after the
// library call, with the GIL held): the buffer-protocol exports, so that another thread cannot
// resize or free an exporter such as array.array while the GIL is released, and what describe()
// hands back beside a description (a DLPack import, whose release may free a copying exporter's
// memory).
class Operands {
 public:
  std::string error;

  Operands() = default;
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  ~Operands() {
    for (int i = 0; i < view_count_; ++i) PyBuffer_Release(&views_[i]);
  }

  epigemm_memory_t memory() const { return device_ < 0 ? EPIGEMM_MEMORY_HOST : EPIGEMM_MEMORY_DEVICE; }
  int device() const { return device_; }

  bool read(nb::handle h, const char* name, bool output, ArrayView* v) {
    PyObject* o = h.ptr();
    ArrayTypes& types = array_types();
    bool done = false;
    if (types.torch_tensor.is_valid() && PyObject_TypeCheck(o, (PyTypeObject*)types.torch_tensor.ptr())) {
      if (!read_torch(o, name, v)) return false;
      done = true;
    } else if (PyObject_CheckBuffer(o)) {
      int status = read_buffer(o, name, output, v);
      if (status < 0) return false;
      done = status > 0;
    }
    if (!done && !read_described(h, name, output, v)) return false;
    if (device_ == kNoDevice) {
      device_ = v->device;
      first_ = name;
    } else if (v->device != device_) {
      error = std::string(name) + " is in " + where(v->device) + "; expected " + where(device_) +
              ", where " + first_ + " is";
      return false;
    }
    return true;
  }

  // A row-major tensor [..., cols] (layer level); the leading dimensions are flattened into rows
  // when their strides allow it without a copy.
  bool layer(nb::handle h, const char* name, bool output, int max_dims, epigemm_tensor_t* t) {
    ArrayView v;
    if (!read(h, name, output, &v)) return false;
    if (v.ndim == 0 || v.ndim > max_dims || (max_dims == 2 && v.ndim != 2)) {
      error = std::string(name) + " has " + std::to_string(v.ndim) + " dimensions; expected " +
              (max_dims == 2 ? "2" : "at least 1 ([..., features])");
      return false;
    }
    const int64_t cols = v.shape[v.ndim - 1];
    int64_t rows = 1;
    for (int i = 0; i < v.ndim - 1; ++i) rows *= v.shape[i];
    // An array without elements: nothing is read or written, and its strides say nothing (NumPy
    // gives 0 for them), so the rows are taken as packed.
    if (rows == 0 || cols == 0) {
      *t = epigemm_tensor_t{v.data, static_cast<epigemm_dtype_t>(v.dtype), rows, cols, std::max<int64_t>(cols, 1),
                            EPIGEMM_MEMORY_HOST};
      return true;
    }
    if (v.strides[v.ndim - 1] != 1 && cols > 1) {
      error = std::string(name) + " has shape " + dims(v.shape, v.ndim) + " and strides " +
              dims(v.strides, v.ndim) + " (elements); expected a unit stride in the last "
              "dimension (row-major rows): make it contiguous first";
      return false;
    }
    // The row stride is the stride of the innermost leading dimension longer than 1; every outer
    // one must step over whole blocks of the inner ones.
    bool found_row_stride = false;
    int64_t row_stride = std::max<int64_t>(cols, 1), span = 0;
    for (int i = v.ndim - 2; i >= 0; --i) {
      if (v.shape[i] == 1) continue;
      if (!found_row_stride) {
        found_row_stride = true;
        row_stride = v.strides[i];
        if (row_stride < 0) {
          error = std::string(name) + " has shape " + dims(v.shape, v.ndim) + " and strides " +
                  dims(v.strides, v.ndim) + " (elements); expected rows at increasing addresses "
                  "(a positive row stride): make it contiguous first";
          return false;
        }
      } else if (v.strides[i] != span) {
        error = std::string(name) + " has shape " + dims(v.shape, v.ndim) + " and strides " +
                dims(v.strides, v.ndim) + " (elements): its leading dimensions cannot be "
                "flattened into rows without a copy; expected them contiguous";
        return false;
      }
      span = v.strides[i] * v.shape[i];
    }
    *t = epigemm_tensor_t{v.data, static_cast<epigemm_dtype_t>(v.dtype), rows, cols, row_stride,
                          EPIGEMM_MEMORY_HOST};
    return true;
  }

  // A column-major matrix (GEMM level): a row-major [r, c] array is the c x r matrix with leading
  // dimension its row stride.
  bool matrix(nb::handle h, const char* name, bool output, epigemm_matrix_t* m) {
    ArrayView v;
    if (!read(h, name, output, &v)) return false;
    if (v.ndim != 2) {
      error = std::string(name) + " has shape " + dims(v.shape, v.ndim) + "; expected a 2-d array";
      return false;
    }
    const int64_t r = v.shape[0], c = v.shape[1];
    if (r == 0 || c == 0) {  // no elements: strides that say nothing (as in layer())
      *m = epigemm_matrix_t{v.data, static_cast<epigemm_dtype_t>(v.dtype), c, r, std::max<int64_t>(c, 1),
                            EPIGEMM_MEMORY_HOST};
      return true;
    }
    if (v.strides[1] != 1 && c > 1) {
      error = std::string(name) + " has shape " + dims(v.shape, 2) + " and strides " +
              dims(v.strides, 2) + " (elements); expected a unit stride in the last dimension "
              "(a row-major [r, c] array, the column-major c x r matrix)";
      return false;
    }
    const int64_t ld = r > 1 ? v.strides[0] : std::max<int64_t>(c, 1);
    *m = epigemm_matrix_t{v.data, static_cast<epigemm_dtype_t>(v.dtype), c, r, ld, EPIGEMM_MEMORY_HOST};
    return true;
  }

  bool vector(nb::handle h, const char* name, bool output, epigemm_vector_t* out) {
    ArrayView v;
    if (!read(h, name, output, &v)) return false;
    if (v.ndim != 1) {
      error = std::string(name) + " has shape " + dims(v.shape, v.ndim) + "; expected a 1-d array";
      return false;
    }
    if (v.strides[0] != 1 && v.shape[0] > 1) {
      error = std::string(name) + " has stride " + std::to_string(v.strides[0]) +
              " (elements); expected a contiguous vector";
      return false;
    }
    *out = epigemm_vector_t{v.data, static_cast<epigemm_dtype_t>(v.dtype), v.shape[0], EPIGEMM_MEMORY_HOST};
    return true;
  }

 private:
  static std::string where(int device) {
    return device < 0 ? std::string("host memory") : "CUDA device " + std::to_string(device);
  }
  static std::string dims(const int64_t* values, int n) {
    std::string s = "(";
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(values[i]);
    return s + (n == 1 ? ",)" : ")");
  }

  bool read_torch(PyObject* o, const char* name, ArrayView* v) {
    static PyObject* const s_dtype = interned("dtype");
    static PyObject* const s_is_cuda = interned("is_cuda");
    static PyObject* const s_is_cpu = interned("is_cpu");
    static PyObject* const s_get_device = interned("get_device");
    static PyObject* const s_data_ptr = interned("data_ptr");
    static PyObject* const s_shape = interned("shape");
    static PyObject* const s_stride = interned("stride");
    static PyObject* const s_device = interned("device");
    ArrayTypes& types = array_types();
    nb::object dtype = attribute(o, s_dtype);
    v->dtype = -1;
    for (int i = 0; i < 3; ++i) {
      if (dtype.ptr() == types.torch_dtypes[i].ptr()) v->dtype = i;
    }
    if (v->dtype < 0) {
      error = std::string(name) + " has dtype " + text_of(dtype) + kDtypeExpected;
      return false;
    }
    if (attribute(o, s_is_cuda).ptr() == Py_True) {
      v->device = int(PyLong_AsLong(call_method(o, s_get_device).ptr()));
    } else if (attribute(o, s_is_cpu).ptr() == Py_True) {
      v->device = -1;
    } else {
      error = std::string(name) + " is on device " + text_of(attribute(o, s_device)) +
              "; expected a CPU or CUDA tensor";
      return false;
    }
    v->data = PyLong_AsVoidPtr(call_method(o, s_data_ptr).ptr());
    if (PyErr_Occurred()) throw nb::python_error();
    int n = 0, m = 0;
    if (!read_int_tuple(attribute(o, s_shape).ptr(), v->shape, &n) ||
        !read_int_tuple(call_method(o, s_stride).ptr(), v->strides, &m) || n != m) {
      error = shape_error(name, n, m);
      return false;
    }
    v->ndim = n;
    return true;
  }

  // 1: read; 0: not a format handled here (the caller asks describe()); -1: refused.
  int read_buffer(PyObject* o, const char* name, bool output, ArrayView* v) {
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      return 0;
    }
    // Released with the other operands' after the call when read; at once when not.
    struct ReleaseUnlessKept {
      Py_buffer* view;
      bool kept = false;
      ~ReleaseUnlessKept() {
        if (!kept) PyBuffer_Release(view);
      }
    } release{&view};
    const char* format = view.format == nullptr ? "B" : view.format;
    if (format[0] == '<' || format[0] == '=' || format[0] == '@') ++format;
    if (std::strcmp(format, "f") == 0 && view.itemsize == 4) {
      v->dtype = EPIGEMM_DTYPE_F32;
    } else if (std::strcmp(format, "e") == 0 && view.itemsize == 2) {
      v->dtype = EPIGEMM_DTYPE_F16;
    } else {
      return 0;
    }
    if (output && view.readonly) {
      error = std::string(name) + " is a read-only array; expected a writable output";
      return -1;
    }
    if (view.ndim > kMaxDims) {
      error = shape_error(name, view.ndim, view.ndim);
      return -1;
    }
    v->data = view.buf;
    v->ndim = view.ndim;
    v->device = -1;
    for (int i = 0; i < view.ndim; ++i) {
      v->shape[i] = view.shape[i];
      if (view.strides[i] % view.itemsize != 0) {
        error = std::string(name) + " has a byte stride of " + std::to_string(view.strides[i]) +
                ", not a multiple of its " + std::to_string(view.itemsize) +
                "-byte elements; expected element-aligned strides";
        return -1;
      }
      v->strides[i] = view.strides[i] / view.itemsize;
    }
    if (view_count_ == kMaxOperands) {  // more than any call reads
      error = std::string(name) + ": more than " + std::to_string(kMaxOperands) + " array operands in one call";
      return -1;
    }
    views_[view_count_++] = view;
    release.kept = true;
    return 1;
  }

  bool read_described(nb::handle h, const char* name, bool output, ArrayView* v) {
    ArrayTypes& types = array_types();
    if (!types.describe.is_valid()) {
      error = std::string(name) + ": no array reader registered (import epigemm, not epigemm._epigemm)";
      return false;
    }
    nb::object described = types.describe(h, name, output);  // raises epigemm's errors itself
    PyObject* d = described.ptr();
    if (!PyTuple_Check(d) || (PyTuple_GET_SIZE(d) != 5 && PyTuple_GET_SIZE(d) != 6)) {
      throw nb::type_error("describe() must return (data, dtype, shape, strides, device[, holder])");
    }
    if (PyTuple_GET_SIZE(d) == 6) held_.push_back(nb::borrow(PyTuple_GET_ITEM(d, 5)));
    v->data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(d, 0));
    v->dtype = int(PyLong_AsLong(PyTuple_GET_ITEM(d, 1)));
    v->device = int(PyLong_AsLong(PyTuple_GET_ITEM(d, 4)));
    if (PyErr_Occurred()) throw nb::python_error();
    nb::object shape = nb::steal(PySequence_Tuple(PyTuple_GET_ITEM(d, 2)));
    nb::object strides = nb::steal(PySequence_Tuple(PyTuple_GET_ITEM(d, 3)));
    if (!shape.is_valid() || !strides.is_valid()) throw nb::python_error();
    int n = 0, m = 0;
    if (!read_int_tuple(shape.ptr(), v->shape, &n) || !read_int_tuple(strides.ptr(), v->strides, &m) || n != m) {
      error = shape_error(name, n, m);
      return false;
    }
    v->ndim = n;
    return true;
  }

  int device_ = kNoDevice;
  const char* first_ = "";
  // In place, not in a container that allocates: the reader runs on every call (a NumPy call's
  // whole Python overhead is a few microseconds). A call reads at most 6 arrays (gemm's A, B, D,
  // bias, aux, bias_grad).
  static constexpr int kMaxOperands = 8;
  Py_buffer views_[kMaxOperands];
  int view_count_ = 0;
  std::vector<nb::object> held_;
};

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

#ifdef EPIGEMM_PYTHON_WITH_CUDA
// Makes `device` current for the scope of a device call, restoring the caller's device after:
// the context's backend state (cuBLAS handles) belongs to the device it was created on.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (device < 0 || cudaGetDevice(&previous_) != cudaSuccess) return;
    if (previous_ != device && cudaSetDevice(device) == cudaSuccess) switched_ = true;
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

struct DeviceBuffer {
  void* data = nullptr;
  size_t bytes = 0;
};
#else
class DeviceGuard {
 public:
  explicit DeviceGuard(int) {}
};
#endif

using epigemm_python::LinearQuery;
using epigemm_python::linear_query_size;

// What a pass's workspace query answers depends on these (the context's backend and TF32 setting
// choose among backends); the answer is cached, the query runs a dispatch per epilogue.
struct LinearShapeKey {
  int query;
  int64_t tokens, in_features, out_features;
  int dtype, memory, backend, allow_tf32;
  bool operator==(const LinearShapeKey& o) const {
    return query == o.query && tokens == o.tokens && in_features == o.in_features &&
           out_features == o.out_features && dtype == o.dtype && memory == o.memory && backend == o.backend &&
           allow_tf32 == o.allow_tf32;
  }
};
struct LinearShapeHash {
  size_t operator()(const LinearShapeKey& k) const {
    size_t h = std::hash<int64_t>()(k.tokens);
    for (int64_t v : {int64_t(k.query), k.in_features, k.out_features, int64_t(k.dtype), int64_t(k.memory),
                      int64_t(k.backend), int64_t(k.allow_tf32)}) {
      h = h * 1000003u ^ std::hash<int64_t>()(v);
    }
    return h;
  }
};

class Context {
 public:
  explicit Context(int device) : device_(device) {
    DeviceGuard guard(device_);
    const epigemm_status_t status = epigemm_context_create(&ctx_);
    if (status != EPIGEMM_STATUS_SUCCESS) {
      throw std::runtime_error(std::string("epigemm_context_create failed: ") + epigemm_status_name(status));
    }
    epigemm_status_t desc_status = epigemm_gemm_desc_create(&desc_);
    if (desc_status != EPIGEMM_STATUS_SUCCESS) {
      epigemm_context_destroy(ctx_);
      throw std::runtime_error(std::string("epigemm_gemm_desc_create failed: ") + epigemm_status_name(desc_status));
    }
  }
  ~Context() {
    DeviceGuard guard(device_);
#ifdef EPIGEMM_PYTHON_WITH_CUDA
    for (auto& [stream, buffer] : device_workspaces_) {
      if (buffer.data != nullptr) cudaFree(buffer.data);
    }
#endif
    epigemm_gemm_desc_destroy(desc_);
    epigemm_context_destroy(ctx_);
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  size_t workspace_needed() const { return workspace_needed_; }

  std::string last_error() const {
    return own_error_.empty() ? std::string(epigemm_context_last_error(ctx_)) : own_error_;
  }

  std::pair<std::string, std::string> last_backend() const {
    epigemm_backend_t backend = EPIGEMM_BACKEND_AUTO;
    const char* reason = nullptr;
    epigemm_context_last_backend(ctx_, &backend, &reason);
    return {epigemm_backend_name(backend), reason == nullptr ? "" : reason};
  }

  bool backend_usable(int backend) const {
    return epigemm_backend_usable(ctx_, static_cast<epigemm_backend_t>(backend)) != 0;
  }
  bool backend_compiled(int backend) const {
    return epigemm_backend_compiled(ctx_, static_cast<epigemm_backend_t>(backend)) != 0;
  }

  // Y = act(X W^T + b); pre = X W^T + b when given (ACT_AUX_BIAS), else not saved (ACT_BIAS).
  int linear_fprop(nb::handle x, nb::handle w, nb::handle bias, nb::handle pre, nb::handle y,
                   int activation, int backend, bool allow_tf32, uintptr_t stream,
                   nb::handle workspace) {
    Operands ops;
    epigemm_tensor_t X{}, W{}, P{}, Y{};
    epigemm_vector_t B{};
    const bool has_bias = !bias.is_none(), has_pre = !pre.is_none();
    if (!ops.layer(x, "X", false, kMaxDims, &X) || !ops.layer(w, "W", false, 2, &W) ||
        (has_bias && !ops.vector(bias, "bias", false, &B)) ||
        (has_pre && !ops.layer(pre, "preact_out", true, kMaxDims, &P)) ||
        !ops.layer(y, "out", true, kMaxDims, &Y)) {
      return refuse(ops.error);
    }
    const epigemm_memory_t mem = ops.memory();
    X.memory = W.memory = P.memory = Y.memory = B.memory = mem;
    if (int status = begin(ops, backend, allow_tf32)) return status;
    DeviceGuard guard(mem == EPIGEMM_MEMORY_DEVICE ? device_ : -1);
    void* ws = nullptr;
    size_t ws_bytes = 0;
    if (int status = linear_workspace(LinearQuery::fprop, X.rows, X.cols, W.rows, X.dtype, mem, stream, workspace,
                                      &ws, &ws_bytes)) {
      return status;
    }
    return run(mem, [&] {
      return epigemm_linear_fprop_act(ctx_, &X, &W, has_bias ? &B : nullptr,
                                      static_cast<epigemm_activation_t>(activation),
                                      has_pre ? &P : nullptr, &Y, ws, ws_bytes,
                                      reinterpret_cast<void*>(stream));
    });
  }

  // dX = (dY W) * act'(pre); bias_grad = sum over tokens of dX (needs pre).
  int linear_dgrad(nb::handle dy, nb::handle w, nb::handle pre, nb::handle bias_grad, nb::handle dx,
                   int activation, int backend, bool allow_tf32, uintptr_t stream,
                   nb::handle workspace) {
    Operands ops;
    epigemm_tensor_t dY{}, W{}, P{}, dX{};
    epigemm_vector_t G{};
    const bool has_pre = !pre.is_none(), has_grad = !bias_grad.is_none();
    if (!ops.layer(dy, "dY", false, kMaxDims, &dY) || !ops.layer(w, "W", false, 2, &W) ||
        (has_pre && !ops.layer(pre, "preact", false, kMaxDims, &P)) ||
        (has_grad && !ops.vector(bias_grad, "bias_grad", true, &G)) ||
        !ops.layer(dx, "out", true, kMaxDims, &dX)) {
      return refuse(ops.error);
    }
    const epigemm_memory_t mem = ops.memory();
    dY.memory = W.memory = P.memory = dX.memory = G.memory = mem;
    if (int status = begin(ops, backend, allow_tf32)) return status;
    // Through an activation the previous layer's pre-activation is needed (DACT), and so it is for
    // that layer's bias gradient (DACT_BGRAD, the identity's included); without either
    // (activation None) the plain data gradient runs.
    if ((activation != kIdentity || has_grad) && !has_pre) {
      own_error_ = std::string("preact is missing with ") +
                   (activation != kIdentity ? std::string("activation ") + activation_name(activation)
                                            : std::string("bias_grad")) +
                   "; expected the previous layer's saved pre-activation [tokens, in_features]";
      return EPIGEMM_STATUS_INVALID_VALUE;
    }
    DeviceGuard guard(mem == EPIGEMM_MEMORY_DEVICE ? device_ : -1);
    void* ws = nullptr;
    size_t ws_bytes = 0;
    if (int status = linear_workspace(LinearQuery::dgrad, dY.rows, W.cols, dY.cols, dY.dtype, mem, stream, workspace,
                                      &ws, &ws_bytes)) {
      return status;
    }
    return run(mem, [&] {
      if (!has_pre) {
        return epigemm_linear_dgrad(ctx_, &dY, &W, nullptr, nullptr, &dX, ws, ws_bytes,
                                    reinterpret_cast<void*>(stream));
      }
      return epigemm_linear_dgrad_act(ctx_, &dY, &W, static_cast<epigemm_activation_t>(activation),
                                      &P, has_grad ? &G : nullptr, &dX, ws, ws_bytes,
                                      reinterpret_cast<void*>(stream));
    });
  }

  // dW (+)= dY^T X; bias_grad = sum over tokens of dY.
  int linear_wgrad(nb::handle x, nb::handle dy, nb::handle dw, bool accumulate, nb::handle bias_grad,
                   int backend, bool allow_tf32, uintptr_t stream, nb::handle workspace) {
    Operands ops;
    epigemm_tensor_t X{}, dY{}, dW{};
    epigemm_vector_t G{};
    const bool has_grad = !bias_grad.is_none();
    if (!ops.layer(x, "X", false, kMaxDims, &X) || !ops.layer(dy, "dY", false, kMaxDims, &dY) ||
        !ops.layer(dw, "out", true, 2, &dW) ||
        (has_grad && !ops.vector(bias_grad, "bias_grad", true, &G))) {
      return refuse(ops.error);
    }
    const epigemm_memory_t mem = ops.memory();
    X.memory = dY.memory = dW.memory = G.memory = mem;
    if (int status = begin(ops, backend, allow_tf32)) return status;
    DeviceGuard guard(mem == EPIGEMM_MEMORY_DEVICE ? device_ : -1);
    void* ws = nullptr;
    size_t ws_bytes = 0;
    if (int status = linear_workspace(accumulate ? LinearQuery::wgrad_accumulate : LinearQuery::wgrad, X.rows, X.cols,
                                      dY.cols, X.dtype, mem, stream, workspace, &ws, &ws_bytes)) {
      return status;
    }
    return run(mem, [&] {
      return epigemm_linear_wgrad(ctx_, &X, &dY, &dW, accumulate ? 1 : 0, has_grad ? &G : nullptr,
                                  ws, ws_bytes, reinterpret_cast<void*>(stream));
    });
  }

  // D = epilogue(alpha op(A) op(B) + beta D), GEMM coordinates, through the context's description.
  int gemm(nb::handle a, nb::handle b, nb::handle d, bool transa, bool transb, float alpha,
           float beta, int epilogue, int activation, nb::handle bias, nb::handle aux, bool aux_is_output,
           nb::handle bias_grad, int backend, bool allow_tf32, uintptr_t stream, nb::handle workspace) {
    Operands ops;
    epigemm_matrix_t A{}, B{}, D{}, X{};
    epigemm_vector_t V{}, G{};
    const bool has_bias = !bias.is_none(), has_aux = !aux.is_none(), has_grad = !bias_grad.is_none();
    if (!ops.matrix(a, "A", false, &A) || !ops.matrix(b, "B", false, &B) ||
        !ops.matrix(d, "D", true, &D) || (has_bias && !ops.vector(bias, "bias", false, &V)) ||
        (has_aux && !ops.matrix(aux, "aux", aux_is_output, &X)) ||
        (has_grad && !ops.vector(bias_grad, "bias_grad", true, &G))) {
      return refuse(ops.error);
    }
    const epigemm_memory_t mem = ops.memory();
    A.memory = B.memory = D.memory = X.memory = V.memory = G.memory = mem;
    if (int status = begin(ops, backend, allow_tf32)) return status;
    epigemm_status_t status = EPIGEMM_STATUS_SUCCESS;
    auto set = [&](epigemm_status_t s) {
      if (status == EPIGEMM_STATUS_SUCCESS) status = s;
    };
    set(epigemm_gemm_desc_set_transpose(desc_, transa ? EPIGEMM_OP_T : EPIGEMM_OP_N,
                                        transb ? EPIGEMM_OP_T : EPIGEMM_OP_N));
    set(epigemm_gemm_desc_set_scalars(desc_, alpha, beta));
    set(epigemm_gemm_desc_set_epilogue(desc_, static_cast<epigemm_epilogue_t>(epilogue)));
    set(epigemm_gemm_desc_set_activation(desc_, static_cast<epigemm_activation_t>(activation)));
    set(epigemm_gemm_desc_set_bias(desc_, has_bias ? &V : nullptr));
    set(epigemm_gemm_desc_set_aux(desc_, has_aux ? &X : nullptr));
    set(epigemm_gemm_desc_set_bias_grad(desc_, has_grad ? &G : nullptr));
    set(epigemm_gemm_desc_set_allow_tf32(desc_, allow_tf32 ? 1 : 0));
    set(epigemm_gemm_desc_set_backend(desc_, static_cast<epigemm_backend_t>(backend)));
    if (status != EPIGEMM_STATUS_SUCCESS) {
      own_error_ = std::string("the GEMM description refused a setting (") +
                   epigemm_status_name(status) + "): epilogue " + std::to_string(epilogue) +
                   ", backend " + std::to_string(backend);
      return status;
    }
    DeviceGuard guard(mem == EPIGEMM_MEMORY_DEVICE ? device_ : -1);
    size_t needed = 0;
    if (epigemm_status_t s = epigemm_gemm_workspace_size(ctx_, desc_, &A, &B, &D, &needed)) return s;
    void* ws = nullptr;
    size_t ws_bytes = 0;
    if (int s = provide_workspace(needed, mem, stream, workspace, &ws, &ws_bytes)) return s;
    return run(mem, [&] {
      return epigemm_gemm(ctx_, desc_, &A, &B, &D, ws, ws_bytes, reinterpret_cast<void*>(stream));
    });
  }

  // The time of one C API call made directly from C++, `calls` times in a row with the same
  // arguments (no synchronization: on the GPU this is the host's cost to enqueue), in seconds per
  // call: the baselines of the Python overhead measurement (python/bench/bench_overhead.py).
  // epigemm_linear_fprop with an optional bias.
  double time_c_linear_fprop(nb::handle x, nb::handle w, nb::handle bias, nb::handle y,
                             uintptr_t stream, nb::handle workspace, int calls) {
    Operands ops;
    epigemm_tensor_t X{}, W{}, Y{};
    epigemm_vector_t B{};
    const bool has_bias = !bias.is_none();
    if (!ops.layer(x, "X", false, kMaxDims, &X) || !ops.layer(w, "W", false, 2, &W) ||
        (has_bias && !ops.vector(bias, "bias", false, &B)) || !ops.layer(y, "out", true, kMaxDims, &Y)) {
      throw std::runtime_error("time_c_linear_fprop: " + ops.error);
    }
    const epigemm_memory_t mem = ops.memory();
    X.memory = W.memory = Y.memory = B.memory = mem;
    return time_c_calls("time_c_linear_fprop", LinearQuery::fprop, X.rows, X.cols, W.rows, X.dtype, mem, stream,
                        workspace, calls, [&](void* ws, size_t ws_bytes) {
                          return epigemm_linear_fprop(ctx_, &X, &W, has_bias ? &B : nullptr, nullptr, &Y, ws,
                                                      ws_bytes, reinterpret_cast<void*>(stream));
                        });
  }

  // The plain epigemm_linear_dgrad: dX = dY W.
  double time_c_linear_dgrad(nb::handle dy, nb::handle w, nb::handle dx, uintptr_t stream, nb::handle workspace,
                             int calls) {
    Operands ops;
    epigemm_tensor_t dY{}, W{}, dX{};
    if (!ops.layer(dy, "dY", false, kMaxDims, &dY) || !ops.layer(w, "W", false, 2, &W) ||
        !ops.layer(dx, "out", true, kMaxDims, &dX)) {
      throw std::runtime_error("time_c_linear_dgrad: " + ops.error);
    }
    const epigemm_memory_t mem = ops.memory();
    dY.memory = W.memory = dX.memory = mem;
    return time_c_calls("time_c_linear_dgrad", LinearQuery::dgrad, dY.rows, W.cols, dY.cols, dY.dtype, mem, stream,
                        workspace, calls, [&](void* ws, size_t ws_bytes) {
                          return epigemm_linear_dgrad(ctx_, &dY, &W, nullptr, nullptr, &dX, ws, ws_bytes,
                                                      reinterpret_cast<void*>(stream));
                        });
  }

  // The plain epigemm_linear_wgrad: dW = dY^T X (not accumulated, no bias gradient).
  double time_c_linear_wgrad(nb::handle x, nb::handle dy, nb::handle dw, uintptr_t stream, nb::handle workspace,
                             int calls) {
    Operands ops;
    epigemm_tensor_t X{}, dY{}, dW{};
    if (!ops.layer(x, "X", false, kMaxDims, &X) || !ops.layer(dy, "dY", false, kMaxDims, &dY) ||
        !ops.layer(dw, "out", true, 2, &dW)) {
      throw std::runtime_error("time_c_linear_wgrad: " + ops.error);
    }
    const epigemm_memory_t mem = ops.memory();
    X.memory = dY.memory = dW.memory = mem;
    return time_c_calls("time_c_linear_wgrad", LinearQuery::wgrad, X.rows, X.cols, dY.cols, X.dtype, mem, stream,
                        workspace, calls, [&](void* ws, size_t ws_bytes) {
                          return epigemm_linear_wgrad(ctx_, &X, &dY, &dW, 0, nullptr, ws, ws_bytes,
                                                      reinterpret_cast<void*>(stream));
                        });
  }

 private:
  // The timing loop of the time_c_* methods: the pass's workspace, then `calls` calls of
  // call(workspace, bytes) without the GIL; seconds per call.
  template <typename Call>
  double time_c_calls(const char* name, LinearQuery query, int64_t tokens, int64_t in_features, int64_t out_features,
                      epigemm_dtype_t dtype, epigemm_memory_t mem, uintptr_t stream, nb::handle workspace, int calls,
                      Call call) {
    DeviceGuard guard(mem == EPIGEMM_MEMORY_DEVICE ? device_ : -1);
    void* ws = nullptr;
    size_t ws_bytes = 0;
    if (int status = linear_workspace(query, tokens, in_features, out_features, dtype, mem, stream, workspace, &ws,
                                      &ws_bytes)) {
      throw std::runtime_error(std::string(name) + ": no workspace (status " + std::to_string(status) + ")");
    }
    nb::gil_scoped_release release;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      if (call(ws, ws_bytes) != EPIGEMM_STATUS_SUCCESS) {
        nb::gil_scoped_acquire acquire;
        throw std::runtime_error(std::string(name) + ": " + epigemm_context_last_error(ctx_));
      }
    }
    const auto stop = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(stop - start).count() / calls;
  }

  // A host call computes the whole GEMM before it returns: other Python threads run meanwhile.
  // A device call only enqueues work, too briefly to be worth releasing the GIL.
  template <typename Call>
  static int run(epigemm_memory_t memory, Call call) {
    if (memory == EPIGEMM_MEMORY_DEVICE) return call();
    nb::gil_scoped_release release;
    return call();
  }

  int refuse(const std::string& message) {
    own_error_ = message;
    return EPIGEMM_STATUS_INVALID_VALUE;
  }

  // Clears this layer's message and applies the backend and TF32 choice: returns a status
  // (0 = go on).
  int begin(const Operands& ops, int backend, bool allow_tf32) {
    own_error_.clear();
    if (ops.device() >= 0 && ops.device() != device_) {
      own_error_ = "the operands are on CUDA device " + std::to_string(ops.device()) +
                   " but this context belongs to device " + std::to_string(device_);
      return EPIGEMM_STATUS_INVALID_VALUE;
    }
    if (backend != backend_) {
      if (epigemm_status_t s = epigemm_context_set_backend(ctx_, static_cast<epigemm_backend_t>(backend))) return s;
      backend_ = backend;
    }
    if (allow_tf32 != allow_tf32_) {
      if (epigemm_status_t s = epigemm_context_set_allow_tf32(ctx_, allow_tf32 ? 1 : 0)) return s;
      allow_tf32_ = allow_tf32;
    }
    return 0;
  }

  int linear_workspace(LinearQuery query, int64_t tokens, int64_t in_features, int64_t out_features,
                       epigemm_dtype_t dtype, epigemm_memory_t memory, uintptr_t stream,
                       nb::handle workspace, void** ws, size_t* ws_bytes) {
    const LinearShapeKey key{int(query), tokens, in_features, out_features, int(dtype), int(memory), backend_,
                             int(allow_tf32_)};
    size_t needed = 0;
    auto found = linear_workspace_bytes_.find(key);
    if (found != linear_workspace_bytes_.end()) {
      needed = found->second;
    } else {
      if (epigemm_status_t s = linear_query_size(query, ctx_, tokens, in_features, out_features, dtype, memory,
                                                 &needed)) {
        return s;
      }
      if (linear_workspace_bytes_.size() > 4096) linear_workspace_bytes_.clear();
      linear_workspace_bytes_.emplace(key, needed);
    }
    return provide_workspace(needed, memory, stream, workspace, ws, ws_bytes);
  }

  // The caller's workspace, (data, bytes), when it passed one (kNeedWorkspace when it is too
  // small), else the context's own (None), grown to `needed`.
  int provide_workspace(size_t needed, epigemm_memory_t memory, uintptr_t stream, nb::handle workspace,
                        void** ws, size_t* ws_bytes) {
    if (!workspace.is_none()) {
      PyObject* o = workspace.ptr();
      if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2) {
        throw nb::type_error("workspace: expected None or a tuple (data, bytes)");
      }
      void* data = PyLong_AsVoidPtr(PyTuple_GET_ITEM(o, 0));
      const size_t bytes = PyLong_AsSize_t(PyTuple_GET_ITEM(o, 1));
      if (PyErr_Occurred()) throw nb::python_error();
      if (bytes < needed) {
        workspace_needed_ = needed;
        return kNeedWorkspace;
      }
      *ws = data;
      *ws_bytes = bytes;
      return 0;
    }
    if (needed == 0) return 0;
    switch (memory) {
      case EPIGEMM_MEMORY_HOST: {
        if (host_workspace_bytes_ < needed) {
          host_workspace_.reset();
          host_workspace_bytes_ = 0;
          void* p = nullptr;
          const size_t bytes = (needed + 63) / 64 * 64;
          if (posix_memalign(&p, 64, bytes) != 0) {
            own_error_ = "could not allocate a host workspace of " + std::to_string(needed) + " bytes";
            return EPIGEMM_STATUS_OUT_OF_MEMORY;
          }
          host_workspace_.reset(p);
          host_workspace_bytes_ = bytes;
        }
        *ws = host_workspace_.get();
        *ws_bytes = host_workspace_bytes_;
        return 0;
      }
      case EPIGEMM_MEMORY_DEVICE: {
#ifdef EPIGEMM_PYTHON_WITH_CUDA
        // One buffer per stream: calls on different streams may run concurrently.
        DeviceBuffer& buffer = device_workspaces_[stream];
        if (buffer.bytes < needed) {
          // cudaFree waits for the device, so no call still in flight uses the old buffer.
          if (buffer.data != nullptr) cudaFree(buffer.data);
          buffer = DeviceBuffer{};
          const cudaError_t err = cudaMalloc(&buffer.data, needed);
          if (err != cudaSuccess) {
            cudaGetLastError();
            buffer.data = nullptr;
            own_error_ = "cudaMalloc of a device workspace of " + std::to_string(needed) +
                         " bytes failed: " + cudaGetErrorString(err);
            return EPIGEMM_STATUS_BACKEND_ERROR;
          }
          buffer.bytes = needed;
        }
        *ws = buffer.data;
        *ws_bytes = buffer.bytes;
        return 0;
#else
        (void)stream;
        own_error_ = "device operands, but this build of the epigemm Python extension has no CUDA";
        return EPIGEMM_STATUS_NOT_SUPPORTED;
#endif
      }
    }
    own_error_ = "memory is " + std::to_string(int(memory)) + "; expected host (0) or device (1)";
    return EPIGEMM_STATUS_INVALID_VALUE;
  }

  int device_;
  epigemm_context_t ctx_ = nullptr;
  epigemm_gemm_desc_t desc_ = nullptr;
  int backend_ = EPIGEMM_BACKEND_AUTO;
  bool allow_tf32_ = false;
  size_t workspace_needed_ = 0;
  std::string own_error_;
  std::unordered_map<LinearShapeKey, size_t, LinearShapeHash> linear_workspace_bytes_;
  std::unique_ptr<void, FreeDeleter> host_workspace_;
  size_t host_workspace_bytes_ = 0;
#ifdef EPIGEMM_PYTHON_WITH_CUDA
  std::unordered_map<uintptr_t, DeviceBuffer> device_workspaces_;
#endif
};

// A DLPack import, held for as long as a call uses its memory: releasing it calls the exporter's
// deleter, which frees the memory where the exported capsule owned it (an exporter that hands out
// a copy).
struct DlpackImport {
  nb::ndarray<nb::ro> array;
};

// (data, dtype code or -1, shape, strides in elements, DLPack device type, device id, dtype text,
// writable, the import) of any object that exports DLPack or the buffer protocol: the path for
// arrays other than NumPy's and PyTorch's (CuPy, JAX, ...). writable is asked only for an output
// (a second import, as a writable array, which refuses a DLPack export flagged read-only); it is
// true otherwise. A TypeError where the object is no such array.
nb::tuple dlpack_describe(nb::handle object, bool output) {
  DlpackImport held;
  if (!nb::try_cast(object, held.array)) throw nb::type_error("not a DLPack array");
  bool writable = true;
  if (output) {
    nb::ndarray<> as_writable;
    writable = nb::try_cast(object, as_writable);
  }
  const nb::ndarray<nb::ro>& array = held.array;
  const nb::dlpack::dtype dt = array.dtype();
  int code = -1;
  if (dt.lanes == 1 && dt.code == uint8_t(nb::dlpack::dtype_code::Float) && dt.bits == 32) code = EPIGEMM_DTYPE_F32;
  if (dt.lanes == 1 && dt.code == uint8_t(nb::dlpack::dtype_code::Float) && dt.bits == 16) code = EPIGEMM_DTYPE_F16;
  if (dt.lanes == 1 && dt.code == uint8_t(nb::dlpack::dtype_code::Bfloat) && dt.bits == 16) code = EPIGEMM_DTYPE_BF16;
  nb::list shape, strides;
  for (size_t i = 0; i < array.ndim(); ++i) {
    shape.append(array.shape(i));
    strides.append(array.stride(i));
  }
  const std::string text = "dlpack code " + std::to_string(dt.code) + ", " + std::to_string(dt.bits) + " bits";
  return nb::make_tuple(reinterpret_cast<uintptr_t>(array.data()), code, nb::tuple(shape),
                        nb::tuple(strides), array.device_type(), array.device_id(), text, writable,
                        nb::cast(std::move(held)));
}

}  // namespace

NB_MODULE(_epigemm, m) {
  using namespace nb::literals;
  m.doc() = "epigemm's C API for the Python package (use the epigemm package, not this module)";
  m.attr("NEED_WORKSPACE") = kNeedWorkspace;
  m.attr("VERSION") = nb::make_tuple(EPIGEMM_VERSION_MAJOR, EPIGEMM_VERSION_MINOR, EPIGEMM_VERSION_PATCH);
#ifdef EPIGEMM_PYTHON_WITH_CUDA
  m.attr("WITH_CUDA") = true;
#else
  m.attr("WITH_CUDA") = false;
#endif
  m.def("status_name", [](int status) { return std::string(epigemm_status_name(static_cast<epigemm_status_t>(status))); });
  m.def("activation_computed", &activation_computed);
  nb::dict activations, backends;
  for (int code : {kIdentity, kGeluTanh, kGeluErf, kRelu, kSilu}) activations[activation_name(code)] = code;
  for (epigemm_backend_t b : {EPIGEMM_BACKEND_AUTO, EPIGEMM_BACKEND_REFERENCE, EPIGEMM_BACKEND_CPU,
                              EPIGEMM_BACKEND_CUDA, EPIGEMM_BACKEND_CUBLASLT, EPIGEMM_BACKEND_CUTLASS}) {
    backends[epigemm_backend_name(b)] = int(b);
  }
  m.attr("ACTIVATIONS") = activations;
  m.attr("BACKENDS") = backends;
  nb::class_<DlpackImport>(m, "_DlpackImport");
  m.def("dlpack_describe", &dlpack_describe, nb::arg("array"), nb::arg("output") = false);
  m.def(
      "set_array_types",
      [](nb::object torch_tensor, nb::object f32, nb::object f16, nb::object bf16, nb::object describe) {
        ArrayTypes& types = array_types();
        if (!torch_tensor.is_none()) {
          types.torch_tensor = torch_tensor;
          types.torch_dtypes[EPIGEMM_DTYPE_F32] = f32;
          types.torch_dtypes[EPIGEMM_DTYPE_F16] = f16;
          types.torch_dtypes[EPIGEMM_DTYPE_BF16] = bf16;
        }
        if (!describe.is_none()) types.describe = describe;
      },
      "torch_tensor"_a.none(), "f32"_a.none(), "f16"_a.none(), "bf16"_a.none(), "describe"_a.none(),
      "Registers torch.Tensor and its dtypes (read in C++) and the reader of other arrays.");
  m.def("cuda_device_count", []() {
#ifdef EPIGEMM_PYTHON_WITH_CUDA
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
#else
    return 0;
#endif
  });

  nb::class_<Context>(m, "Context")
      .def(nb::init<int>(), nb::arg("device"))
      .def_prop_ro("device", &Context::device)
      .def_prop_ro("workspace_needed", &Context::workspace_needed)
      .def("last_error", &Context::last_error)
      .def("last_backend", &Context::last_backend)
      .def("backend_usable", &Context::backend_usable)
      .def("backend_compiled", &Context::backend_compiled)
      // Operands are None where not given (nanobind refuses None unless .none() says so).
      .def("linear_fprop", &Context::linear_fprop, "X"_a, "W"_a, "bias"_a.none(), "preact"_a.none(),
           "Y"_a, "activation"_a, "backend"_a, "allow_tf32"_a, "stream"_a, "workspace"_a.none())
      .def("linear_dgrad", &Context::linear_dgrad, "dY"_a, "W"_a, "preact"_a.none(),
           "bias_grad"_a.none(), "dX"_a, "activation"_a, "backend"_a, "allow_tf32"_a, "stream"_a,
           "workspace"_a.none())
      .def("linear_wgrad", &Context::linear_wgrad, "X"_a, "dY"_a, "dW"_a, "accumulate"_a,
           "bias_grad"_a.none(), "backend"_a, "allow_tf32"_a, "stream"_a, "workspace"_a.none())
      .def("gemm", &Context::gemm, "A"_a, "B"_a, "D"_a, "transa"_a, "transb"_a, "alpha"_a, "beta"_a,
           "epilogue"_a, "activation"_a, "bias"_a.none(), "aux"_a.none(), "aux_is_output"_a, "bias_grad"_a.none(),
           "backend"_a, "allow_tf32"_a, "stream"_a, "workspace"_a.none())
      .def("time_c_linear_fprop", &Context::time_c_linear_fprop, "X"_a, "W"_a, "bias"_a.none(),
           "Y"_a, "stream"_a, "workspace"_a.none(), "calls"_a)
      .def("time_c_linear_dgrad", &Context::time_c_linear_dgrad, "dY"_a, "W"_a, "dX"_a, "stream"_a,
           "workspace"_a.none(), "calls"_a)
      .def("time_c_linear_wgrad", &Context::time_c_linear_wgrad, "X"_a, "dY"_a, "dW"_a, "stream"_a,
           "workspace"_a.none(), "calls"_a);
}
