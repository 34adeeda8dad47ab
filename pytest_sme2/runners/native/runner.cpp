// pytest-sme2 native runner: loads one ExecuTorch .pte, runs warm-up + timed executions with the
// ETDump event tracer attached, writes the ETDump (and optionally the last outputs).
//
// Its flags are a superset of upstream executor_runner's (--model_path, --etdump_path,
// --num_executions, --cpu_threads) so the same argv shape drives both; ours add --warmup,
// --input_file and --output_file. Warm-up executions are traced like timed ones: the ETDump holds
// warmup + num_executions Execute blocks and the analysis drops the first `warmup`, exactly as for
// the Python runner.
//
// --trace_executions T (with --trace_warmup TW) separates timing from tracing: the warm-up and
// timed executions then run on a Module without any event tracer, each Method::execute timed by
// this runner's own clock (the summary's "execute_ms", one value per execute in order, warm-up
// included), so no per-operator recording is inside the figure; then, when T > 0, a second
// Module over the same program, with the ETDump tracer, runs TW + T executions (generations with
// --generate) for the operator breakdown, and only those are in the ETDump. T = 0 writes no ETDump.
// Start-up figures (load, first execute, memory) are the untraced Module's: the peak is read
// before the traced Module loads. The summary's "clock_overhead_ns" is what one timing (two clock
// reads) costs here, measured in this process.
//
// Errors: one line on stderr naming the file and the problem, exit status 1. The runtime's own
// ET_LOG lines may precede it; ours is always the last line.
//
// Success ends with one JSON line: threads, executions, and what the ETDump cannot hold — the
// program load's time (the runtime traces the method load, not Module::load) and resident
// memory (kB, from /proc/self/status on Linux and Android; null where there is none): before
// loading, after the method load, and the peak (VmHWM) at the end.
//
// --generate P,D runs an LLM generation instead of fixed inputs (a program whose forward takes
// (tokens[1, n] int64, input_pos[1] int64) and keeps its KV cache inside): --warmup W and
// --num_executions N count generations then. Each generation prefills P prompt tokens (one
// execute where forward's sequence length is dynamic, else one execute per token), then decodes
// D steps of one token each, greedy (argmax over the last position's logits), EOS ignored. The
// prompt is the fixed sequence 1 + (7919 i + 13) mod (vocab - 1), i = 0..P-1 (the same in the
// Python runner: pytest_sme2.results.generation.prompt_token_ids). Every generation must give
// the same tokens from the same prompt: a program that does not reset its cache between
// generations is refused in one line. The summary line then has a "generation" object: the
// program's limits, the executes per generation, the sampled token ids and per-generation wall
// times (prefill, first sampling, all sampling, decode, whole generation), in ms.
// P,0 (prefill only) and 1,D (only one-token executes at positions 0..D) are the phase-only
// processes whose kernel traces tell the phases apart.
// --generate P,D,K[,C] runs each generation at context depth K (llama-bench's "@ dK"): first K
// tokens fill the KV cache at positions 0..K-1 in executes of up to C tokens (0 or none: the
// longest forward takes), untimed by the generation's timers but executed (and traced) like any
// other, then the prompt and the decode steps run at K.. and are timed. The fill's token ids and
// the prompt are one fixed sequence of K + P ids (the prompt its last P). The summary's
// "depth_executes" counts the fill's executes per generation, which come first in each.
//
// --kernel_lib PATH (repeatable) loads a shared library before the program, in the order given,
// with its symbols global: a library that registers operators the program calls outside the
// delegate (the executorch wheel's libcustom_ops_aot_lib.so: llama::custom_sdpa.out,
// llama::update_cache.out, ...) registers them into the same kernel registry this runner's
// libexecutorch.so holds. The summary's "kernel_libraries_ms" is what loading them took.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
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

#include <dlfcn.h>
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
  std::string data_path;  // the program's .ptd (its weights), upstream's --data_path
  std::string etdump_path = "model.etdump";
  uint32_t num_executions = 1;
  int32_t cpu_threads = -1; // -1: performant-core heuristic, 0: keep the runtime default
  uint32_t warmup = 0;
  std::string input_file;
  std::string output_file;
  bool generate = false;
  int64_t prompt_tokens = 0;  // P
  int64_t new_tokens = 0;     // D
  int64_t depth = 0;          // K: tokens filled into the KV cache before the prompt
  int64_t depth_chunk = 0;    // C: tokens per execute of that fill (0: the longest forward)
  int64_t trace_executions = -1; // -1: the timed executions are traced (upstream's way)
  uint32_t trace_warmup = 0;
  std::string probe_path;         // the machine-state probe's program (see Probe below)
  uint32_t probe_executions = 24; // its executes timed at each end of the timed pass ...
  uint32_t probe_warmup = 8;      // ... after these, untimed (a cold cache, a first call)
  std::vector<std::string> kernel_libs;  // loaded in this order before the program

  bool untraced() const { return trace_executions >= 0; }
};

const char* kUsage =
    "usage: sme2_runner --model_path M.pte [--data_path M.ptd] [--etdump_path OUT.etdump]\n"
    "                   [--num_executions N]\n"
    "                   [--warmup W] [--cpu_threads T] [--input_file IN] [--output_file OUT]\n"
    "                   [--generate PROMPT_TOKENS,NEW_TOKENS[,DEPTH[,DEPTH_CHUNK]]]\n"
    "                   [--trace_executions T [--trace_warmup TW]]\n"
    "                   [--probe_path PROBE.pte [--probe_executions K] [--probe_warmup W]]\n"
    "                   [--kernel_lib LIB.so ...]\n";

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
    } else if (name == "data_path") {
      o.data_path = value;
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
    } else if (name == "trace_executions") {
      o.trace_executions = parse_int(name, value, 0, UINT32_MAX);
    } else if (name == "probe_path") {
      o.probe_path = value;
    } else if (name == "probe_executions") {
      o.probe_executions = static_cast<uint32_t>(parse_int(name, value, 1, 100000));
    } else if (name == "probe_warmup") {
      o.probe_warmup = static_cast<uint32_t>(parse_int(name, value, 0, 100000));
    } else if (name == "kernel_lib") {
      o.kernel_libs.push_back(value);
    } else if (name == "trace_warmup") {
      o.trace_warmup = static_cast<uint32_t>(parse_int(name, value, 0, UINT32_MAX));
    } else if (name == "generate") {
      std::vector<std::string> parts;
      size_t from = 0;
      for (size_t comma; (comma = value.find(',', from)) != std::string::npos; from = comma + 1) {
        parts.push_back(value.substr(from, comma - from));
      }
      parts.push_back(value.substr(from));
      if (parts.size() < 2 || parts.size() > 4) {
        throw Failure("--generate: '" + value + "' is not PROMPT_TOKENS,NEW_TOKENS[,DEPTH" +
                      "[,DEPTH_CHUNK]] (e.g. 64,32 or 64,32,512)");
      }
      o.generate = true;
      o.prompt_tokens = parse_int("generate (prompt tokens)", parts[0], 1, 1 << 20);
      o.new_tokens = parse_int("generate (new tokens)", parts[1], 0, 1 << 20);
      o.depth = parts.size() > 2 ? parse_int("generate (depth)", parts[2], 0, 1 << 24) : 0;
      o.depth_chunk = parts.size() > 3 ? parse_int("generate (depth chunk)", parts[3], 0, 1 << 20)
                                       : 0;
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

// The Module's data files: the program's .ptd, or none.
std::vector<std::string> data_files(const Options& o) {
  return o.data_path.empty() ? std::vector<std::string>{} : std::vector<std::string>{o.data_path};
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


// ---- the runtime's log: operators a program needs and this runner lacks ---------------------
//
// The runtime names a missing operator only in its log ("Missing operator: [3]
// llama::custom_sdpa.out"), then fails the method load with OperatorMissing. We wrap the
// platform's log function (executorch::runtime::register_pal): the messages still go where they
// went, and the names are kept for the one-line error.
pal_emit_log_message_method g_previous_log = nullptr;
std::vector<std::string> g_missing_operators;
// What the runtime logged about the program's data file (pytest_sme2.readers.pte_data reads
// the same messages): a program loaded without one, a key the file lacks, a file it cannot read.
bool g_no_data_map = false;
bool g_not_flat_tensor = false;
std::string g_missing_key;

void capture_data_log(const std::string& text) {
  static const char kKey[] = " for key ";
  if (text.find("external_data_map is null") != std::string::npos) {
    g_no_data_map = true;
  }
  if (text.find("Failed to parse FlatTensor header") != std::string::npos) {
    g_not_flat_tensor = true;
  }
  const size_t key = text.find(kKey);
  if (g_missing_key.empty() && key != std::string::npos &&
      (text.find("Failed to get metadata") != std::string::npos ||
       text.find("Failed to get constant data") != std::string::npos)) {
    std::string rest = text.substr(key + sizeof kKey - 1);
    g_missing_key = rest.substr(0, rest.find_first_of(" \n"));
  }
}

void capture_log(et_timestamp_t timestamp, et_pal_log_level_t level, const char* filename,
                 const char* function, size_t line, const char* message, size_t length) {
  static const char kMissing[] = "Missing operator: ";
  const std::string text(message, length);
  capture_data_log(text);
  const size_t at = text.find(kMissing);
  if (at != std::string::npos) {
    std::string rest = text.substr(at + sizeof kMissing - 1);
    if (!rest.empty() && rest[0] == '[') { // "[3] llama::custom_sdpa.out"
      const size_t close = rest.find("] ");
      rest = close == std::string::npos ? rest : rest.substr(close + 2);
    }
    while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) {
      rest.pop_back();
    }
    if (!rest.empty() && std::find(g_missing_operators.begin(), g_missing_operators.end(),
                                   rest) == g_missing_operators.end()) {
      g_missing_operators.push_back(rest);
    }
  }
  if (g_previous_log != nullptr) {
    g_previous_log(timestamp, level, filename, function, line, message, length);
  }
}

void watch_log() {
  const auto* pal = executorch::runtime::get_pal_impl();
  g_previous_log = pal != nullptr ? pal->emit_log_message : nullptr;
  executorch::runtime::register_pal(
      executorch::runtime::PalImpl::create(capture_log, __FILE__));
}

// The line for a program refused for its data file, worded as pytest_sme2.readers.pte_data's;
// empty when the log named no such cause.
std::string data_failure(const Options& o) {
  const std::string& pte = o.model_path;
  const std::string name = pte.substr(pte.find_last_of('/') + 1);
  const std::string redo = "; put the .ptd exported with " + name + " beside it";
  if (g_no_data_map) {
    const std::string stem = name.substr(0, name.rfind('.'));
    return pte + ": its weights live in a separate .ptd data file and none was found; put " +
           "the .ptd exported with it beside it as " +
           (stem == "model" ? std::string("model.ptd") : stem + ".ptd or model.ptd");
  }
  if (!o.data_path.empty() && !g_missing_key.empty()) {
    return o.data_path + " is not the data file of " + name + ": it lacks the weight '" +
           g_missing_key + "' the program needs" + redo;
  }
  if (!o.data_path.empty() && g_not_flat_tensor) {
    return o.data_path + ": not an ExecuTorch data file (the runtime cannot read its header)" +
           redo;
  }
  return "";
}

// The line for a method that failed to load: a missing operator is named, with the way out.
std::string load_failure(const std::string& model_path, const std::string& method, Error e) {
  if (e == Error::OperatorMissing && !g_missing_operators.empty()) {
    std::string ops;
    for (size_t i = 0; i < g_missing_operators.size() && i < 4; ++i) {
      ops += (i ? ", " : "") + g_missing_operators[i];
    }
    std::string line = model_path + ": method '" + method + "' needs operator" +
        (g_missing_operators.size() > 1 ? "s " : " ") + ops + ", which neither this runner " +
        "(built against the ExecuTorch wheel) nor the wheel's operator libraries register";
    if (ops.find("llama::") != std::string::npos) {
      line += "; export with plain attention (export_llama -kv without "
              "--use_sdpa_with_kv_cache) to run it here, or run it with a llama_main built with "
              "ExecuTorch's custom LLM ops";
    } else {
      line += "; export without it, or use a runner built with the library that registers it";
    }
    return line;
  }
  return model_path + ": cannot load method '" + method + "' (" + describe(e) +
         "; a delegate or operator may be missing from this build)";
}

// ---- generation ------------------------------------------------------------------------------

// The fixed prompt: token i is 1 + (7919 i + 13) mod (vocab - 1), in [1, vocab); the same
// in Python (pytest_sme2.results.generation.prompt_token_ids).
std::vector<int64_t> prompt_ids(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  const int64_t span = vocab > 1 ? vocab - 1 : 1;
  for (int64_t i = 0; i < n; ++i) {
    ids[static_cast<size_t>(i)] = 1 + (7919 * i + 13) % span;
  }
  return ids;
}

// A constant method of an export_llama program (get_max_seq_len, use_kv_cache...): its one
// output as an integer, or -1 where the program has no such method.
int64_t constant_method(Module& constants, const std::vector<std::string>& names,
                        const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return -1;
  }
  auto out = constants.execute(name);
  if (!out.ok() || out->empty()) {
    return -1;
  }
  const EValue& v = out->at(0);
  if (v.isInt()) {
    return v.toInt();
  }
  if (v.isBool()) {
    return v.toBool() ? 1 : 0;
  }
  return -1;
}

std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%.6f", v[i]);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "]";
}

std::string json_ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(v[i]);
  }
  return s + "]";
}

// Greedy sampling: the index of the largest logit of the last position. ``finite`` is cleared
// when that row holds a NaN or an infinity (read in the same pass: it costs the sampling nothing).
int64_t argmax_last(const Tensor& logits, const std::string& model_path, bool& finite) {
  if (logits.scalar_type() != ScalarType::Float) {
    throw Failure(model_path + ": forward's logits are ExecuTorch scalar type " +
                  std::to_string(static_cast<int>(logits.scalar_type())) +
                  "; the generation loop samples float32 logits only");
  }
  const int64_t vocab = logits.size(logits.dim() - 1);
  const float* row = logits.const_data_ptr<float>() + (logits.numel() - vocab);
  int64_t best = 0;
  bool ok = std::isfinite(row[0]);
  for (int64_t k = 1; k < vocab; ++k) {
    ok = ok && std::isfinite(row[k]);
    if (row[k] > row[best]) {
      best = k;
    }
  }
  finite = ok;
  return best;
}

// Non-finite elements (NaN, +-inf) of the floating-point tensors among ``outputs``.
uint64_t nonfinite_elements(const std::vector<EValue>& outputs) {
  uint64_t n = 0;
  for (const EValue& v : outputs) {
    if (!v.isTensor()) {
      continue;
    }
    const Tensor& t = v.toTensor();
    if (t.scalar_type() == ScalarType::Float) {
      const float* p = t.const_data_ptr<float>();
      for (ssize_t i = 0; i < t.numel(); ++i) {
        n += std::isfinite(p[i]) ? 0 : 1;
      }
    } else if (t.scalar_type() == ScalarType::Double) {
      const double* p = t.const_data_ptr<double>();
      for (ssize_t i = 0; i < t.numel(); ++i) {
        n += std::isfinite(p[i]) ? 0 : 1;
      }
    } else if (t.scalar_type() == ScalarType::Half) {
      // IEEE half: exponent bits all ones is an infinity or a NaN.
      const auto* p = static_cast<const uint16_t*>(t.const_data_ptr());
      for (ssize_t i = 0; i < t.numel(); ++i) {
        n += (p[i] & 0x7C00) == 0x7C00 ? 1 : 0;
      }
    }
  }
  return n;
}

// What one timing costs: the median of back-to-back steady_clock reads, in ns (two reads make
// one timing). Measured once per process, on the device itself.
double clock_overhead_ns() {
  std::vector<double> ns(2001);
  for (double& v : ns) {
    const auto a = std::chrono::steady_clock::now();
    const auto b = std::chrono::steady_clock::now();
    v = std::chrono::duration<double, std::nano>(b - a).count();
  }
  std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
  return ns[ns.size() / 2];
}

struct GenerationPlan {
  int64_t max_seq_len = -1;
  int64_t max_context_len = -1;
  int64_t vocab = -1;
  int64_t prefill_chunk = 1; // tokens one execute takes: forward's upper bound if dynamic
  bool dynamic = false;
  bool kv_cache = false;
  int64_t prefill_executes = 0;
  int64_t depth_chunk = 1;     // tokens per execute of the depth fill
  int64_t depth_executes = 0;  // the fill's executes per generation
};

GenerationPlan plan_generation(Module& module, const std::string& method, const Options& o) {
  auto meta = module.method_meta(method);
  if (!meta.ok()) {
    throw Failure(o.model_path + ": no metadata for method '" + method + "'");
  }
  // forward(tokens[1, n] int64, input_pos[1] int64) -> logits[..., vocab] float32
  auto shape_of = [&](size_t i) -> std::string {
    auto t = meta->input_tensor_meta(i);
    if (!t.ok()) {
      return "?";
    }
    const char* dt = numpy_dtype(t->scalar_type());
    return std::string(dt ? dt : "?") +
        shape_text(std::vector<int32_t>(t->sizes().begin(), t->sizes().end()));
  };
  bool fits = meta->num_inputs() == 2;
  for (size_t i = 0; fits && i < 2; ++i) {
    auto tag = meta->input_tag(i);
    auto t = meta->input_tensor_meta(i);
    fits = tag.ok() && tag.get() == Tag::Tensor && t.ok() &&
        t->scalar_type() == ScalarType::Long && t->sizes().size() == (i == 0 ? 2u : 1u) &&
        t->sizes()[0] == 1;
  }
  if (!fits) {
    std::string took;
    for (size_t i = 0; i < meta->num_inputs(); ++i) {
      took += (i ? ", " : "") + shape_of(i);
    }
    throw Failure(o.model_path + ": method '" + method + "' takes (" + took + "), not " +
                  "(tokens int64[1, n], input_pos int64[1]); --generate needs an LLM exported " +
                  "with a KV cache (export_llama -kv)");
  }
  GenerationPlan plan;
  // The constant methods, read through a second, untraced Module over the same file: executed
  // through the traced one they would add Execute blocks to the ETDump.
  Module constants(o.model_path, data_files(o), Module::LoadMode::Mmap);
  auto names = constants.method_names();
  std::vector<std::string> have;
  if (names.ok()) {
    have.assign(names->begin(), names->end());
  }
  plan.max_seq_len = constant_method(constants, have, "get_max_seq_len");
  plan.max_context_len = constant_method(constants, have, "get_max_context_len");
  plan.vocab = constant_method(constants, have, "get_vocab_size");
  plan.kv_cache = constant_method(constants, have, "use_kv_cache") == 1;
  const int64_t dynamic_flag = constant_method(constants, have, "enable_dynamic_shape");
  const int64_t upper = meta->input_tensor_meta(0)->sizes()[1];
  plan.dynamic = dynamic_flag == 1 || (dynamic_flag == -1 && upper > 1);
  if (!plan.dynamic && upper != 1) {
    throw Failure(o.model_path + ": forward takes a fixed tokens[1, " + std::to_string(upper) +
                  "] without a dynamic sequence length; --generate needs tokens[1, 1] or a " +
                  "dynamic length");
  }
  plan.prefill_chunk = plan.dynamic ? upper : 1;
  if (plan.vocab <= 0 && meta->num_outputs() > 0) {
    auto out = meta->output_tensor_meta(0);
    if (out.ok() && !out->sizes().empty()) {
      plan.vocab = out->sizes()[out->sizes().size() - 1];
    }
  }
  const int64_t context = plan.max_context_len > 0 ? plan.max_context_len : plan.max_seq_len;
  const int64_t needed = o.depth + o.prompt_tokens + o.new_tokens; // positions 0 .. K+P+D-1
  const bool over_context = context > 0 && needed > context;
  const bool over_prefill = plan.dynamic && o.prompt_tokens > plan.prefill_chunk;
  if (over_context || over_prefill) {
    const std::string depth = o.depth > 0 ? "depth " + std::to_string(o.depth) + " + " : "";
    throw Failure(o.model_path + ": " + depth + "prompt " + std::to_string(o.prompt_tokens) +
                  " + new " + std::to_string(o.new_tokens) + " tokens is over the program's " +
                  "limits (max_seq_len " + std::to_string(plan.max_seq_len) +
                  ", max_context_len " + std::to_string(plan.max_context_len) + ": " + depth +
                  "prompt + new tokens <= " + std::to_string(context) +
                  (plan.dynamic ? "; one prefill takes at most " +
                  std::to_string(plan.prefill_chunk) + " tokens" : std::string()) + ")");
  }
  plan.prefill_executes = plan.dynamic ? 1 : o.prompt_tokens;
  plan.depth_chunk = o.depth_chunk > 0 ? std::min(o.depth_chunk, plan.prefill_chunk)
                                       : plan.prefill_chunk;
  plan.depth_chunk = std::max<int64_t>(plan.depth_chunk, 1);
  plan.depth_executes = (o.depth + plan.depth_chunk - 1) / plan.depth_chunk;
  return plan;
}

struct GenerationRun {
  std::vector<int64_t> tokens;   // sampled: the first from the prefill, then one per decode step
  double prefill_ms = 0, first_sampling_ms = 0, sampling_ms = 0, decode_ms = 0, total_ms = 0;
  std::vector<double> execute_ms; // each Method::execute by this runner's clock, in order
  uint32_t nonfinite_steps = 0;   // sampled steps whose logits held a NaN or an infinity
};

// One generation: the depth fill (K tokens, untimed), P prompt tokens, then D greedy steps. All
// inputs live on this stack frame's vectors for the duration of each execute.
GenerationRun generate_once(Module& module, const std::string& method, const Options& o,
                            const GenerationPlan& plan, const std::vector<int64_t>& fill,
                            const std::vector<int64_t>& prompt, uint32_t index, uint32_t total) {
  using executorch::extension::make_tensor_ptr;
  GenerationRun g;
  g.tokens.reserve(static_cast<size_t>(o.new_tokens) + 1);
  int64_t pos = 0;
  std::vector<int64_t> pos_buf(1, 0);
  std::vector<int64_t> token_buf(1, 0);
  g.execute_ms.reserve(
      static_cast<size_t>(plan.depth_executes + plan.prefill_executes + o.new_tokens));
  auto step = [&](const int64_t* ids, int64_t n) -> EValue {
    pos_buf[0] = pos;
    auto tokens = make_tensor_ptr({1, static_cast<executorch::aten::SizesType>(n)},
                                  const_cast<int64_t*>(ids), ScalarType::Long);
    auto input_pos = make_tensor_ptr({1}, pos_buf.data(), ScalarType::Long);
    // Inputs are set outside the timed span, as the traced Method::execute event leaves them.
    Error set = module.set_inputs(method, {EValue(*tokens), EValue(*input_pos)});
    const auto e0 = std::chrono::steady_clock::now();
    auto result = set == Error::Ok ? module.execute(method)
                                   : executorch::runtime::Result<std::vector<EValue>>(set);
    g.execute_ms.push_back(ms_since(e0));
    if (!result.ok()) {
      throw Failure(o.model_path + ": generation " + std::to_string(index + 1) + " of " +
                    std::to_string(total) + " failed at position " + std::to_string(pos) +
                    " (" + describe(result.error()) + ")");
    }
    pos += n;
    if (result->empty() || !result->at(0).isTensor()) {
      throw Failure(o.model_path + ": forward returned no logits tensor");
    }
    return result->at(0);
  };
  for (size_t i = 0; i < fill.size(); i += static_cast<size_t>(plan.depth_chunk)) {
    const size_t n = std::min(fill.size() - i, static_cast<size_t>(plan.depth_chunk));
    step(&fill[i], static_cast<int64_t>(n)); // positions 0 .. K-1: the context depth, untimed
  }
  const auto t0 = std::chrono::steady_clock::now();
  EValue logits;
  if (plan.dynamic) {
    logits = step(prompt.data(), static_cast<int64_t>(prompt.size()));
  } else {
    for (size_t i = 0; i < prompt.size(); ++i) {
      logits = step(&prompt[i], 1);
    }
  }
  g.prefill_ms = ms_since(t0);
  auto s0 = std::chrono::steady_clock::now();
  bool finite = true;
  g.tokens.push_back(argmax_last(logits.toTensor(), o.model_path, finite));
  g.first_sampling_ms = ms_since(s0);
  g.nonfinite_steps += finite ? 0 : 1;
  g.sampling_ms = g.first_sampling_ms;
  const auto d0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < o.new_tokens; ++k) {
    token_buf[0] = g.tokens.back();
    logits = step(token_buf.data(), 1);
    s0 = std::chrono::steady_clock::now();
    g.tokens.push_back(argmax_last(logits.toTensor(), o.model_path, finite));
    g.sampling_ms += ms_since(s0);
    g.nonfinite_steps += finite ? 0 : 1;
  }
  g.decode_ms = ms_since(d0);
  g.total_ms = ms_since(t0);
  return g;
}

// What one pass of executions recorded: per-execute times by this runner's clock (when it
// timed them), the executes run, and, with --generate, the summary's "generation" object.
struct Pass {
  std::vector<double> execute_ms;
  uint32_t executions = 0;
  std::string generation;
  uint64_t nonfinite = 0; // forward: non-finite output elements; generate: non-finite steps
};

// Runs W + N generations (``warmup`` + ``runs``). Every generation's tokens must equal the
// first's: the same prompt from position 0 gives the same tokens unless state leaks between
// generations (a KV cache the program does not reset or mask). ``label`` names the pass in the
// per-generation lines ("Generation", or "Traced generation").
Pass run_generations(Module& module, const std::string& method, const Options& o,
                     uint32_t warmup, uint32_t runs, const std::string& label) {
  const GenerationPlan plan = plan_generation(module, method, o);
  // One fixed sequence of K + P ids: the first K fill the cache, the last P are the prompt.
  const std::vector<int64_t> context = prompt_ids(o.depth + o.prompt_tokens, plan.vocab);
  const std::vector<int64_t> fill(context.begin(), context.begin() + o.depth);
  const std::vector<int64_t> prompt(context.begin() + o.depth, context.end());
  const uint32_t total = warmup + runs;
  std::vector<double> prefill, first_sampling, sampling, decode, whole;
  std::vector<int64_t> first_tokens;
  Pass pass;
  for (uint32_t i = 0; i < total; ++i) {
    GenerationRun g = generate_once(module, method, o, plan, fill, prompt, i, total);
    if (i == 0) {
      first_tokens = g.tokens;
      pass.nonfinite = g.nonfinite_steps; // the first generation's steps: checked once
    } else if (g.tokens != first_tokens) {
      size_t k = 0;
      while (k < g.tokens.size() && g.tokens[k] == first_tokens[k]) {
        ++k;
      }
      throw Failure(o.model_path + ": generation " + std::to_string(i + 1) + " sampled other " +
                    "tokens than generation 1 from the same prompt (token " +
                    std::to_string(k + 1) + ": " + std::to_string(g.tokens[k]) + " vs " +
                    std::to_string(first_tokens[k]) + "): the program does not reset its KV " +
                    "cache between generations, so its timings would not measure one " +
                    "generation; nothing was measured");
    }
    std::printf("%s%s %u of %u: prefill %f ms, decode %f ms\n",
                i < warmup ? "Warm-up " : "", i < warmup ? "generation" : label.c_str(),
                i < warmup ? i + 1 : i - warmup + 1, i < warmup ? warmup : runs, g.prefill_ms,
                g.decode_ms);
    prefill.push_back(g.prefill_ms);
    first_sampling.push_back(g.first_sampling_ms);
    sampling.push_back(g.sampling_ms);
    decode.push_back(g.decode_ms);
    whole.push_back(g.total_ms);
    pass.execute_ms.insert(pass.execute_ms.end(), g.execute_ms.begin(), g.execute_ms.end());
    pass.executions +=
        static_cast<uint32_t>(plan.depth_executes + plan.prefill_executes + o.new_tokens);
  }
  std::ostringstream js;
  js << "{\"prompt_tokens\": " << o.prompt_tokens << ", \"new_tokens\": " << o.new_tokens
     << ", \"warmup\": " << warmup << ", \"generations\": " << total
     << ", \"prefill_executes\": " << plan.prefill_executes
     << ", \"decode_executes\": " << o.new_tokens << ", \"depth\": " << o.depth
     << ", \"depth_executes\": " << plan.depth_executes
     << ", \"dynamic_shape\": " << (plan.dynamic ? "true" : "false")
     << ", \"use_kv_cache\": " << (plan.kv_cache ? "true" : "false")
     << ", \"max_seq_len\": " << plan.max_seq_len
     << ", \"max_context_len\": " << plan.max_context_len << ", \"vocab_size\": " << plan.vocab
     << ", \"prompt\": " << json_ints(prompt) << ", \"tokens\": " << json_ints(first_tokens)
     << ", \"nonfinite_steps\": " << pass.nonfinite
     << ", \"prefill_ms\": " << json_list(prefill)
     << ", \"first_sampling_ms\": " << json_list(first_sampling)
     << ", \"sampling_ms\": " << json_list(sampling) << ", \"decode_ms\": " << json_list(decode)
     << ", \"generation_ms\": " << json_list(whole) << "}";
  pass.generation = js.str();
  return pass;
}

// W + N executions of fixed inputs; the last one's outputs go to ``outputs`` when it is given.
Pass run_forwards(Module& module, const std::string& method, const std::vector<Input>& inputs,
                  const Options& o, uint32_t warmup, uint32_t runs, const std::string& label,
                  std::vector<EValue>* outputs) {
  const uint32_t total = warmup + runs;
  Pass pass;
  pass.execute_ms.reserve(total);
  double timed_ms = 0.0;
  for (uint32_t i = 0; i < total; ++i) {
    // Inputs are set before every execution, untimed, as upstream's loop and the Python
    // runtime's forward() do: memory planning may reuse a planned input's buffer for
    // activations, so after one run it no longer holds the input (measured: toy_cnn's second
    // run computed a different output when inputs were set only once).
    set_inputs(module, method, inputs, o.model_path);
    const auto t0 = std::chrono::steady_clock::now();
    auto result = module.execute(method); // one Execute block in a traced Module's ETDump
    const double ms = ms_since(t0);
    if (!result.ok()) {
      throw Failure(o.model_path + ": execution " + std::to_string(i + 1) + " of " +
                    std::to_string(total) + " failed (" + describe(result.error()) + ")");
    }
    pass.execute_ms.push_back(ms);
    if (i < warmup) {
      std::printf("Warm-up %u of %u: %f ms\n", i + 1, warmup, ms);
    } else {
      timed_ms += ms;
      std::printf("%s %u of %u: %f ms\n", label.c_str(), i - warmup + 1, runs, ms);
    }
    if (i + 1 == total) {
      pass.nonfinite = nonfinite_elements(result.get()); // once, on the last run's outputs
      if (outputs != nullptr) {
        *outputs = std::move(result.get()); // valid until the next execute: there is none
      }
    }
  }
  if (label == "Iteration") {
    std::printf("Model executed successfully %u time(s) in %f ms.\n", runs, timed_ms);
  }
  pass.executions = total;
  return pass;
}

// Loads ``o.model_path`` into ``module`` and its method; the load's timers in ms.
std::string load_program(Module& module, const Options& o, double& program_ms,
                         double& method_ms) {
  const auto load_t0 = std::chrono::steady_clock::now();
  if (const Error e = module.load(); e != Error::Ok) {
    const std::string data = data_failure(o);
    throw Failure(!data.empty() ? data : o.model_path + ": the ExecuTorch runtime refused the " +
                  "program (" + describe(e) + ")");
  }
  auto names = module.method_names();
  if (!names.ok() || names->empty()) {
    throw Failure(o.model_path + ": the program has no methods");
  }
  // "forward" like the Python runner; otherwise the program's only/first method like upstream.
  const std::string method = names->count("forward") ? "forward" : *names->begin();
  program_ms = ms_since(load_t0); // method_names() above loads nothing more
  const auto method_t0 = std::chrono::steady_clock::now();
  if (const Error e = module.load_method(method); e != Error::Ok) {
    const std::string data = data_failure(o);
    throw Failure(!data.empty() && e != Error::OperatorMissing ? data
                  : load_failure(o.model_path, method, e));
  }
  method_ms = ms_since(method_t0);
  return method;
}

Pass run_pass(Module& module, const std::string& method, const Options& o, uint32_t warmup,
              uint32_t runs, const std::string& label, std::vector<EValue>* outputs) {
  if (o.generate) {
    return run_generations(module, method, o, warmup, runs,
                           label == "Iteration" ? "Generation" : "Traced generation");
  }
  auto meta = module.method_meta(method);
  if (!meta.ok()) {
    throw Failure(o.model_path + ": no metadata for method '" + method + "'");
  }
  const std::vector<Input> inputs = make_inputs(meta.get(), o);
  return run_forwards(module, method, inputs, o, warmup, runs, label, outputs);
}

void write_etdump(Module& module, const Options& o) {
  auto* etdump = static_cast<ETDumpGen*>(module.event_tracer());
  executorch::etdump::ETDumpResult dump = etdump->get_etdump_data();
  if (dump.buf == nullptr || dump.size == 0) {
    throw Failure(o.etdump_path + ": the event tracer recorded nothing; no ETDump to write");
  }
  std::unique_ptr<void, void (*)(void*)> owned(dump.buf, std::free);
  write_file(o.etdump_path, dump.buf, dump.size, "ETDump");
}

// ---- the machine-state probe ---------------------------------------------------------------
// --probe_path P.pte: a fixed small program (pytest-sme2's machine_probe: one XNNPACK GEMM) timed
// --probe_executions times (after --probe_warmup untimed) right before the first warm-up and
// right after the last timed run,
// untraced, on the same thread pool: its speed is the machine's at both ends of the block,
// whatever the program under test does (a VM that switches speed, a phone that migrates cores).
struct Probe {
  std::unique_ptr<Module> module;
  std::string method;
  std::vector<Input> inputs;
  Options options;          // the probe's own: its path, no input or data file
  long rss_kb = 0;          // resident memory its load added: left out of the peak reported
  std::vector<double> before_us, after_us;
};

std::unique_ptr<Probe> load_probe(const Options& o) {
  if (o.probe_path.empty()) {
    return nullptr;
  }
  if (!is_file(o.probe_path)) {
    throw Failure(o.probe_path + ": probe program not found");
  }
  auto p = std::make_unique<Probe>();
  p->options = o;
  p->options.model_path = o.probe_path;
  p->options.data_path.clear();
  p->options.input_file.clear();
  const long rss_before = status_kb("VmRSS:");
  p->module = std::make_unique<Module>(o.probe_path, Module::LoadMode::File);
  double ignored_program_ms = 0, ignored_method_ms = 0;
  p->method = load_program(*p->module, p->options, ignored_program_ms, ignored_method_ms);
  auto meta = p->module->method_meta(p->method);
  if (!meta.ok()) {
    throw Failure(o.probe_path + ": no metadata for the probe's method");
  }
  p->inputs = make_inputs(meta.get(), p->options);
  const long rss_after = status_kb("VmRSS:");
  p->rss_kb = rss_before >= 0 && rss_after >= rss_before ? rss_after - rss_before : 0;
  return p;
}

void time_probe(Probe& p, std::vector<double>& out_us) {
  const uint32_t warmup = p.options.probe_warmup;
  for (uint32_t i = 0; i < warmup + p.options.probe_executions; ++i) {
    set_inputs(*p.module, p.method, p.inputs, p.options.model_path);
    const auto t0 = std::chrono::steady_clock::now();
    auto result = p.module->execute(p.method);
    const double ms = ms_since(t0);
    if (!result.ok()) {
      throw Failure(p.options.model_path + ": probe execution failed (" +
                    describe(result.error()) + ")");
    }
    if (i >= warmup) {
      out_us.push_back(ms * 1000.0);
    }
  }
}

std::string probe_json(const Probe* p) {
  if (p == nullptr) {
    return "";
  }
  std::ostringstream js;
  js << ", \"probe\": {\"rss_kb\": " << p->rss_kb << ", \"before_us\": " << json_list(p->before_us)
     << ", \"after_us\": " << json_list(p->after_us) << "}";
  return js.str();
}

// Loads --kernel_lib libraries (their operators register themselves as they load); the ms.
double load_kernel_libraries(const Options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::string& lib : o.kernel_libs) {
    if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      const char* why = dlerror();
      throw Failure(lib + ": cannot load this operator library (" +
                    (why != nullptr ? std::string(why) : std::string("unknown reason")) + ")");
    }
  }
  return ms_since(t0);
}

int run(const Options& o) {
  if (o.generate && (!o.input_file.empty() || !o.output_file.empty())) {
    throw Failure("--generate makes its own tokens: --input_file and --output_file do not "
                  "apply (the sampled token ids are in the summary line)");
  }
  if (!is_file(o.model_path)) {
    throw Failure(o.model_path + ": model file not found");
  }
  if (!o.data_path.empty() && !is_file(o.data_path)) {
    throw Failure(o.data_path + ": data file not found (the .ptd of " + o.model_path + ")");
  }
  if (!o.input_file.empty() && !is_file(o.input_file)) {
    throw Failure(o.input_file + ": input file not found");
  }
  const bool writes_etdump = !o.untraced() || o.trace_executions > 0;
  if (writes_etdump) {
    require_parent_dir(o.etdump_path, "ETDump");
  }
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

  const double kernel_libraries_ms = load_kernel_libraries(o);
  const long rss_before_load = status_kb("VmRSS:");
  // Untraced: no event tracer at all on the Module whose executions are timed.
  Module module(o.model_path, data_files(o), Module::LoadMode::File,
                o.untraced() ? nullptr : std::make_unique<ETDumpGen>());
  double program_load_ms = 0, method_load_ms = 0;
  const std::string method = load_program(module, o, program_load_ms, method_load_ms);
  const long rss_after_load = status_kb("VmRSS:");
  std::unique_ptr<Probe> probe = load_probe(o);
  if (probe) {
    time_probe(*probe, probe->before_us);
  }
  std::vector<EValue> outputs;
  Pass timed = run_pass(module, method, o, o.warmup, o.num_executions, "Iteration",
                        o.output_file.empty() ? nullptr : &outputs);
  if (probe) {
    time_probe(*probe, probe->after_us);
  }
  if (!o.output_file.empty()) {
    write_outputs(outputs, o.output_file);
  }
  // Before a traced Module adds its own; without what the probe's load added.
  long peak_rss = status_kb("VmHWM:");
  if (probe && peak_rss > probe->rss_kb) {
    peak_rss -= probe->rss_kb;
  }
  std::string traced;  // the summary's "traced" object: the operator-traced pass
  if (!o.untraced()) {
    write_etdump(module, o);
  } else if (o.trace_executions > 0) {
    Module traced_module(o.model_path, data_files(o), Module::LoadMode::File,
                         std::make_unique<ETDumpGen>());
    double ignored_program_ms = 0, ignored_method_ms = 0;
    load_program(traced_module, o, ignored_program_ms, ignored_method_ms);
    Pass pass = run_pass(traced_module, method, o, o.trace_warmup,
                         static_cast<uint32_t>(o.trace_executions), "Traced iteration", nullptr);
    write_etdump(traced_module, o);
    traced = ", \"traced\": {\"warmup\": " + std::to_string(o.trace_warmup) + ", \"runs\": " +
        std::to_string(o.trace_executions) + ", \"executions\": " +
        std::to_string(pass.executions) + "}";
  }
  // Same summary line as the Python runner's child process (pytest_sme2.runners.base).
  // "executions" counts Method::execute calls of the timed pass.
  std::string timing;
  if (o.untraced()) {
    char clock[64];
    std::snprintf(clock, sizeof clock, "%.1f", clock_overhead_ns());
    timing = ", \"timing\": \"untraced\", \"clock_overhead_ns\": " + std::string(clock) +
        ", \"execute_ms\": " + json_list(timed.execute_ms) + traced;
  }
  std::string extras = o.generate ? std::string()
      : ", \"nonfinite_outputs\": " + std::to_string(timed.nonfinite);
  if (!o.kernel_libs.empty()) {
    char ms[64];
    std::snprintf(ms, sizeof ms, "%.3f", kernel_libraries_ms);
    extras += ", \"kernel_libraries_ms\": " + std::string(ms);
  }
  std::printf("{\"threads\": %zu, \"executions\": %u, \"program_load_ms\": %.6f, "
              "\"method_load_ms\": %.6f, \"rss_before_load_kb\": %s, \"rss_after_load_kb\": %s, "
              "\"peak_rss_kb\": %s%s%s%s%s%s}\n",
              pool->get_thread_count(), timed.executions, program_load_ms, method_load_ms,
              json_kb(rss_before_load).c_str(), json_kb(rss_after_load).c_str(),
              json_kb(peak_rss).c_str(), extras.c_str(), timing.c_str(),
              probe_json(probe.get()).c_str(),
              timed.generation.empty() ? "" : ", \"generation\": ", timed.generation.c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  executorch::runtime::runtime_init();
  watch_log();
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
