// pytest-sme2 native runner: loads one ExecuTorch .pte, runs warm-up + timed executions with the
// ETDump event tracer attached, writes the ETDump (and optionally the last outputs).
//
// Its flags are a superset of upstream executor_runner's (--model_path, --etdump_path,
// --num_executions, --cpu_threads) so the same argv shape drives both; ours add --warmup,
// --input_file and --output_file. Warm-up executions are traced like timed ones: the ETDump holds
// warmup + num_executions Execute blocks and the analysis drops the first `warmup`, exactly as for
// the Python runner.
//
// Errors: one line on stderr naming the file and the problem, exit status 1. The runtime's own
// ET_LOG lines may precede it; ours is always the last line.
//
// Success ends with one JSON line: threads, executions, and what the ETDump cannot hold — the
// program load's time (the runtime traces the method load, not Module::load) and resident
// memory (kB, from /proc/self/status on Linux and Android; null where there is none): before
// loading, after the method load, and the peak (VmHWM) at the end.

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <executorch/devtools/etdump/etdump_flatcc.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/platform/runtime.h>

// The package ships libexecutorch_threadpool.so but not threadpool.h / cpuinfo_utils.h, so we
// declare the three exported functions we call. Non-virtual members and free functions: only the
// (mangled) names must match, not the class layout.
namespace executorch::extension::threadpool {
class ThreadPool {
 public:
  size_t get_thread_count() const;
  bool _unsafe_reset_threadpool(uint32_t num_threads);
};
ThreadPool* get_threadpool();
} // namespace executorch::extension::threadpool
namespace executorch::extension::cpuinfo {
uint32_t get_num_performant_cores();
} // namespace executorch::extension::cpuinfo

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::etdump::ETDumpGen;
using executorch::extension::TensorPtr;
using executorch::extension::module::Module;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::MethodMeta;
using executorch::runtime::Tag;

// Thrown for every user-facing failure; main() prints it as the one stderr line.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string describe(Error e) {
  char code[16];
  std::snprintf(code, sizeof code, "0x%" PRIx32, static_cast<uint32_t>(e));
  return std::string(executorch::runtime::to_string(e)) + ", error " + code;
}

struct Options {
  std::string model_path = "model.pte";
  std::string etdump_path = "model.etdump";
  uint32_t num_executions = 1;
  int32_t cpu_threads = -1; // -1: performant-core heuristic, 0: keep the runtime default
  uint32_t warmup = 0;
  std::string input_file;
  std::string output_file;
};

const char* kUsage =
    "usage: sme2_runner --model_path M.pte [--etdump_path OUT.etdump] [--num_executions N]\n"
    "                   [--warmup W] [--cpu_threads T] [--input_file IN] [--output_file OUT]\n";

long long parse_int(const std::string& flag, const std::string& text, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    throw Failure("--" + flag + ": '" + text + "' is not an integer in [" + std::to_string(lo) +
                  ", " + std::to_string(hi) + "]");
  }
  return v;
}

// gflags-style: --name=value, --name value, and a single leading dash also works. An unknown flag
// gets gflags' own wording so tooling that recognises upstream failures recognises ours.
Options parse_flags(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg.size() < 2 || arg[0] != '-') {
      throw Failure("unexpected argument '" + arg + "' (flags take the form --name=value)");
    }
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    std::string value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      throw Failure("flag '--" + name + "' is missing its value");
    }
    if (name == "model_path") {
      o.model_path = value;
    } else if (name == "etdump_path") {
      o.etdump_path = value;
    } else if (name == "num_executions") {
      o.num_executions = static_cast<uint32_t>(parse_int(name, value, 1, UINT32_MAX));
    } else if (name == "warmup") {
      o.warmup = static_cast<uint32_t>(parse_int(name, value, 0, UINT32_MAX));
    } else if (name == "cpu_threads") {
      o.cpu_threads = static_cast<int32_t>(parse_int(name, value, -1, 1024));
    } else if (name == "input_file") {
      o.input_file = value;
    } else if (name == "output_file") {
      o.output_file = value;
    } else {
      throw Failure("ERROR: unknown command line flag '" + name + "'");
    }
  }
  return o;
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Upstream aborts (SIGABRT) when the ETDump folder is missing, after all the runs. We check every
// output folder before loading anything, so a typo costs nothing and reads as one clear line.
void require_parent_dir(const std::string& path, const char* what) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) {
    return; // current directory
  }
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Failure(path + ": cannot write the " + what + ": folder " + dir + " does not exist");
  }
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> fh(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!fh) {
    throw Failure(path + ": cannot open the input file (" + std::strerror(errno) + ")");
  }
  std::vector<uint8_t> data;
  uint8_t chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, fh.get())) > 0) {
    data.insert(data.end(), chunk, chunk + n);
  }
  if (std::ferror(fh.get())) {
    throw Failure(path + ": read error on the input file");
  }
  return data;
}

void write_file(const std::string& path, const void* data, size_t size, const char* what) {
  std::unique_ptr<FILE, int (*)(FILE*)> fh(std::fopen(path.c_str(), "wb"), std::fclose);
  if (!fh) {
    throw Failure(path + ": cannot write the " + what + " (" + std::strerror(errno) + ")");
  }
  if (size > 0 && std::fwrite(data, 1, size, fh.get()) != size) {
    throw Failure(path + ": short write of the " + what + " (" + std::strerror(errno) + ")");
  }
  if (std::fclose(fh.release()) != 0) {
    throw Failure(path + ": cannot finish writing the " + what + " (" + std::strerror(errno) +
                  ")");
  }
}

// numpy dtype names of the tensor file format (pytest_sme2/tensorfile.py SCALAR_TYPES).
const char* numpy_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return "uint8";
    case ScalarType::Char: return "int8";
    case ScalarType::Short: return "int16";
    case ScalarType::Int: return "int32";
    case ScalarType::Long: return "int64";
    case ScalarType::Half: return "float16";
    case ScalarType::Float: return "float32";
    case ScalarType::Double: return "float64";
    case ScalarType::Bool: return "bool";
    default: return nullptr;
  }
}

std::string shape_text(const std::vector<int32_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  }
  return s + "]";
}

// One input's storage and the tensor that views it. The Method may keep a pointer to a
// non-memory-planned input, so the bytes live as long as the Module does.
struct Input {
  std::vector<int32_t> sizes;
  ScalarType type;
  std::vector<uint8_t> bytes;
  TensorPtr tensor;
};

size_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: case ScalarType::Char: case ScalarType::Bool: return 1;
    case ScalarType::Short: case ScalarType::Half: return 2;
    case ScalarType::Int: case ScalarType::Float: return 4;
    case ScalarType::Long: case ScalarType::Double: return 8;
    default: return 0;
  }
}

// Every element set to one, in the element's own encoding (little-endian, as on every target).
void fill_ones(Input& in, const std::string& model_path) {
  const size_t w = element_size(in.type);
  if (w == 0) {
    throw Failure(model_path + ": cannot fill an input of ExecuTorch scalar type " +
                  std::to_string(static_cast<int>(in.type)) + " with ones; pass --input_file");
  }
  const float f = 1.0f;
  const double d = 1.0;
  const uint16_t h = 0x3C00; // IEEE half 1.0
  std::memset(in.bytes.data(), 0, in.bytes.size());
  for (size_t k = 0; k + w <= in.bytes.size(); k += w) {
    switch (in.type) {
      case ScalarType::Float: std::memcpy(&in.bytes[k], &f, w); break;
      case ScalarType::Double: std::memcpy(&in.bytes[k], &d, w); break;
      case ScalarType::Half: std::memcpy(&in.bytes[k], &h, w); break;
      default: in.bytes[k] = 1; // integers and bool: low byte first
    }
  }
}

std::vector<Input> make_inputs(const MethodMeta& meta, const Options& o) {
  std::vector<Input> inputs;
  size_t total = 0;
  for (size_t i = 0; i < meta.num_inputs(); ++i) {
    auto tag = meta.input_tag(i);
    if (!tag.ok() || tag.get() != Tag::Tensor) {
      throw Failure(o.model_path + ": input " + std::to_string(i) +
                    " is not a tensor; this runner feeds tensor inputs only");
    }
    auto info = meta.input_tensor_meta(i);
    if (!info.ok()) {
      throw Failure(o.model_path + ": no metadata for input " + std::to_string(i) + " (" +
                    describe(info.error()) + ")");
    }
    Input in;
    in.sizes.assign(info->sizes().begin(), info->sizes().end());
    in.type = info->scalar_type();
    in.bytes.resize(info->nbytes());
    total += in.bytes.size();
    inputs.push_back(std::move(in));
  }
  if (!o.input_file.empty()) {
    // Trust the program's metadata for the layout; the sidecar JSON is for Python readers.
    std::vector<uint8_t> data = read_file(o.input_file);
    if (data.size() != total) {
      std::string need;
      for (size_t i = 0; i < inputs.size(); ++i) {
        const char* dt = numpy_dtype(inputs[i].type);
        need += (i ? ", " : "") + std::string(dt ? dt : "?") + shape_text(inputs[i].sizes);
      }
      throw Failure(o.input_file + ": holds " + std::to_string(data.size()) + " bytes, the " +
                    "model's inputs need " + std::to_string(total) + " (" + need + ")");
    }
    size_t offset = 0;
    for (auto& in : inputs) {
      std::memcpy(in.bytes.data(), data.data() + offset, in.bytes.size());
      offset += in.bytes.size();
    }
  } else {
    for (auto& in : inputs) {
      fill_ones(in, o.model_path); // like upstream executor_runner
    }
  }
  for (auto& in : inputs) {
    // Contiguous (default dim order): the tensor file and numpy are row-major.
    in.tensor = executorch::extension::make_tensor_ptr(
        std::vector<executorch::aten::SizesType>(in.sizes.begin(), in.sizes.end()),
        in.bytes.data(), in.type);
  }
  return inputs;
}

void set_inputs(Module& module, const std::string& method, const std::vector<Input>& inputs,
                const std::string& model_path) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (const Error e = module.set_input(method, EValue(*inputs[i].tensor), i); e != Error::Ok) {
      throw Failure(model_path + ": input " + std::to_string(i) + " " +
                    shape_text(inputs[i].sizes) + " was refused (" + describe(e) + ")");
    }
  }
}

void write_outputs(const std::vector<EValue>& outputs, const std::string& path) {
  std::vector<uint8_t> data;
  std::ostringstream json;
  json << "{\"tensors\": [";
  bool first = true;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].isTensor()) {
      continue; // the Python runner keeps tensor outputs only; so do we
    }
    const Tensor& t = outputs[i].toTensor();
    const char* dtype = numpy_dtype(t.scalar_type());
    if (!dtype) {
      throw Failure(path + ": output " + std::to_string(i) + " has ExecuTorch scalar type " +
                    std::to_string(static_cast<int>(t.scalar_type())) +
                    ", which the tensor file format cannot name");
    }
    for (size_t d = 0; d < t.dim_order().size(); ++d) {
      if (t.dim_order()[d] != d) {
        throw Failure(path + ": output " + std::to_string(i) +
                      " is not contiguous (non-default dim order); cannot write it row-major");
      }
    }
    const auto* p = static_cast<const uint8_t*>(t.const_data_ptr());
    data.insert(data.end(), p, p + t.nbytes());
    std::vector<int32_t> sizes(t.sizes().begin(), t.sizes().end());
    json << (first ? "" : ", ") << "{\"dtype\": \"" << dtype << "\", \"shape\": "
         << shape_text(sizes) << "}";
    first = false;
  }
  json << "]}\n";
  write_file(path, data.data(), data.size(), "output file");
  const std::string text = json.str();
  write_file(path + ".json", text.data(), text.size(), "output sidecar");
}

// A "VmRSS:" / "VmHWM:" line of /proc/self/status in kB, or -1 where the file or line is
// missing (macOS; some sandboxes).
long status_kb(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::size_t n = std::strlen(field);
  for (std::string line; std::getline(status, line);) {
    if (line.compare(0, n, field) == 0) {
      return std::strtol(line.c_str() + n, nullptr, 10);
    }
  }
  return -1;
}

std::string json_kb(long kb) {
  return kb < 0 ? "null" : std::to_string(kb);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int run(const Options& o) {
  if (!is_file(o.model_path)) {
    throw Failure(o.model_path + ": model file not found");
  }
  if (!o.input_file.empty() && !is_file(o.input_file)) {
    throw Failure(o.input_file + ": input file not found");
  }
  require_parent_dir(o.etdump_path, "ETDump");
  if (!o.output_file.empty()) {
    require_parent_dir(o.output_file, "output file");
  }

  // The pool must be sized before the program loads: XNNPACK captures it when the delegate is
  // initialised, and resizing later leaves it with a dangling pool (the Python runner, too).
  // No NoThreadPoolGuard at 1 thread (upstream adds one): we keep the same threading as the
  // Python runner so that native and Python differ only in the process around the runtime.
  auto* pool = executorch::extension::threadpool::get_threadpool();
  if (pool == nullptr) {
    throw Failure("cannot create the CPU thread pool (cpuinfo initialisation failed)");
  }
  const uint32_t threads = o.cpu_threads == -1
      ? executorch::extension::cpuinfo::get_num_performant_cores()
      : static_cast<uint32_t>(o.cpu_threads);
  if (threads > 0) {
    pool->_unsafe_reset_threadpool(threads);
  }

  const long rss_before_load = status_kb("VmRSS:");
  const auto load_t0 = std::chrono::steady_clock::now();
  Module module(o.model_path, Module::LoadMode::File, std::make_unique<ETDumpGen>());
  if (const Error e = module.load(); e != Error::Ok) {
    throw Failure(o.model_path + ": the ExecuTorch runtime refused the program (" + describe(e) +
                  ")");
  }
  auto names = module.method_names();
  if (!names.ok() || names->empty()) {
    throw Failure(o.model_path + ": the program has no methods");
  }
  // "forward" like the Python runner; otherwise the program's only/first method like upstream.
  const std::string method = names->count("forward") ? "forward" : *names->begin();
  const double program_load_ms = ms_since(load_t0); // method_names() above loads nothing more
  const auto method_t0 = std::chrono::steady_clock::now();
  if (const Error e = module.load_method(method); e != Error::Ok) {
    throw Failure(o.model_path + ": cannot load method '" + method + "' (" + describe(e) +
                  "; a delegate or operator may be missing from this build)");
  }
  const double method_load_ms = ms_since(method_t0);
  const long rss_after_load = status_kb("VmRSS:");
  auto meta = module.method_meta(method);
  if (!meta.ok()) {
    throw Failure(o.model_path + ": no metadata for method '" + method + "'");
  }
  std::vector<Input> inputs = make_inputs(meta.get(), o);
  const uint32_t total = o.warmup + o.num_executions;
  double timed_ms = 0.0;
  std::vector<EValue> outputs;
  for (uint32_t i = 0; i < total; ++i) {
    // Inputs are set before every execution, untimed, as upstream's loop and the Python
    // runtime's forward() do: memory planning may reuse a planned input's buffer for
    // activations, so after one run it no longer holds the input (measured: toy_cnn's second
    // run computed a different output when inputs were set only once).
    set_inputs(module, method, inputs, o.model_path);
    const auto t0 = std::chrono::steady_clock::now();
    auto result = module.execute(method); // one Execute block in the ETDump per call
    const double ms = ms_since(t0);
    if (!result.ok()) {
      throw Failure(o.model_path + ": execution " + std::to_string(i + 1) + " of " +
                    std::to_string(total) + " failed (" + describe(result.error()) + ")");
    }
    if (i < o.warmup) {
      std::printf("Warm-up %u of %u: %f ms\n", i + 1, o.warmup, ms);
    } else {
      timed_ms += ms;
      std::printf("Iteration %u of %u: %f ms\n", i - o.warmup + 1, o.num_executions, ms);
    }
    if (i + 1 == total) {
      outputs = std::move(result.get()); // valid until the next execute: there is none
    }
  }
  std::printf("Model executed successfully %u time(s) in %f ms.\n", o.num_executions, timed_ms);

  auto* etdump = static_cast<ETDumpGen*>(module.event_tracer());
  executorch::etdump::ETDumpResult dump = etdump->get_etdump_data();
  if (dump.buf == nullptr || dump.size == 0) {
    throw Failure(o.etdump_path + ": the event tracer recorded nothing; no ETDump to write");
  }
  std::unique_ptr<void, void (*)(void*)> owned(dump.buf, std::free);
  write_file(o.etdump_path, dump.buf, dump.size, "ETDump");

  if (!o.output_file.empty()) {
    write_outputs(outputs, o.output_file);
  }
  // Same summary line as the Python runner's child process (pytest_sme2.runners.base).
  std::printf("{\"threads\": %zu, \"executions\": %u, \"program_load_ms\": %.6f, "
              "\"method_load_ms\": %.6f, \"rss_before_load_kb\": %s, \"rss_after_load_kb\": %s, "
              "\"peak_rss_kb\": %s}\n",
              pool->get_thread_count(), total, program_load_ms, method_load_ms,
              json_kb(rss_before_load).c_str(), json_kb(rss_after_load).c_str(),
              json_kb(status_kb("VmHWM:")).c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  executorch::runtime::runtime_init();
  try {
    return run(parse_flags(argc, argv));
  } catch (const Failure& f) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", f.what());
    return 1;
  } catch (const std::exception& e) { // e.g. std::bad_alloc on a huge input
    std::fflush(stdout);
    std::fprintf(stderr, "%s: unexpected failure (%s)\n", argc > 0 ? argv[0] : "runner",
                 e.what());
    return 1;
  }
}
