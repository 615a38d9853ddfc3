// Myelin flow files written byte by byte from a plain description, following the layout in
// serialize/flow/flow.h (which fields exist from which version), for the flow importer's tests and
// the fuzz seeds (tests/fuzz/make_seeds.cpp). It shares no code with the reader, so a test that
// reads what it writes checks the reader against a second reading of the format.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace nnasm {

using FlowAttrs = std::vector<std::pair<std::string, std::string>>;

struct FlowVarSpec {
  FlowVarSpec(std::string n, std::string t, std::vector<int32_t> s, std::string d = "", uint32_t f = 0,
              std::vector<std::string> a = {}, FlowAttrs at = {})
      : name(std::move(n)), type(std::move(t)), shape(std::move(s)), data(std::move(d)), flags(f),
        aliases(std::move(a)), attrs(std::move(at)) {}
  std::string name;
  std::string type;  // "float32", "&float32" written as is
  std::vector<int32_t> shape;
  std::string data;    // raw bytes (f32_bytes, i32_bytes); empty: none
  uint32_t flags = 0;  // written from version 5; REF becomes a '&' before the type before that
  std::vector<std::string> aliases;
  FlowAttrs attrs;     // written from version 6
};

struct FlowOpSpec {
  std::string name, type;
  std::vector<std::string> in, out;
  FlowAttrs attrs;
};

struct FlowFuncSpec {
  std::string name;
  std::vector<std::string> ops;
};

struct FlowCnxSpec {
  std::string name;
  std::vector<std::string> links;
};

struct FlowBlobSpec {
  std::string name, type;
  FlowAttrs attrs;
  std::string data;
};

struct FlowSpec {
  int version = 6;
  std::vector<FlowVarSpec> vars;
  std::vector<FlowOpSpec> ops;
  std::vector<FlowFuncSpec> funcs;
  std::vector<FlowCnxSpec> cnxs;
  std::vector<FlowBlobSpec> blobs;  // written from version 4
};

constexpr uint32_t FLOW_SPEC_REF = 4, FLOW_SPEC_LEARNABLE = 8, FLOW_SPEC_OUT = 2;

inline void put_le(std::string* s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) *s += static_cast<char>((v >> (8 * i)) & 0xff);
}

inline std::string f32_bytes(const std::vector<float>& v) {
  std::string s;
  for (float x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    put_le(&s, u, 4);
  }
  return s;
}

inline std::string i32_bytes(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) put_le(&s, static_cast<uint32_t>(x), 4);
  return s;
}

inline std::string flow_bytes(const FlowSpec& f) {
  std::string s;
  const bool flags = f.version >= 5;
  auto i32 = [&s](int64_t v) { put_le(&s, static_cast<uint32_t>(static_cast<int32_t>(v)), 4); };
  auto str = [&](const std::string& t) {
    i32(static_cast<int64_t>(t.size()));
    s += t;
  };
  auto strs = [&](const std::vector<std::string>& v) {
    i32(static_cast<int64_t>(v.size()));
    for (const std::string& t : v) str(t);
  };
  auto attrs = [&](const FlowAttrs& a) {
    i32(static_cast<int64_t>(a.size()));
    for (const auto& [k, v] : a) {
      str(k);
      str(v);
    }
  };
  s += "flow";
  i32(f.version);
  if (flags) i32(0);
  i32(static_cast<int64_t>(f.vars.size()));
  for (const FlowVarSpec& v : f.vars) {
    if (flags) i32(v.flags);
    str(v.name);
    strs(v.aliases);
    str(!flags && (v.flags & FLOW_SPEC_REF) ? "&" + v.type : v.type);
    i32(static_cast<int64_t>(v.shape.size()));
    for (int32_t d : v.shape) i32(d);
    if (f.version >= 6) attrs(v.attrs);
    put_le(&s, v.data.size(), 8);
    s += v.data;
  }
  i32(static_cast<int64_t>(f.ops.size()));
  for (const FlowOpSpec& o : f.ops) {
    if (flags) i32(0);
    str(o.name);
    str(o.type);
    strs(o.in);
    strs(o.out);
    attrs(o.attrs);
  }
  i32(static_cast<int64_t>(f.funcs.size()));
  for (const FlowFuncSpec& fn : f.funcs) {
    if (flags) i32(0);
    str(fn.name);
    strs(fn.ops);
  }
  i32(static_cast<int64_t>(f.cnxs.size()));
  for (const FlowCnxSpec& c : f.cnxs) {
    if (flags) i32(0);
    str(c.name);
    strs(c.links);
  }
  if (f.version >= 4) {
    i32(static_cast<int64_t>(f.blobs.size()));
    for (const FlowBlobSpec& b : f.blobs) {
      if (flags) i32(0);
      str(b.name);
      str(b.type);
      attrs(b.attrs);
      put_le(&s, b.data.size(), 8);
      s += b.data;
    }
  }
  return s;
}

// The two-layer MLP of the flow tests and seeds: y = softmax(relu(x·W0 + b0)·W1 + b1), x
// [-1, 4] (a batch dimension), W0 [4, 5], W1 [5, 3], the weights learnable (a flag from version
// 5) and named the way TensorFlow exports name them ("layer0/W", "layer0/MatMul:0"), with a
// connector and a blob so that every section of the file has something in it.
inline FlowSpec flow_mlp_spec(int version, const std::vector<float>& w0, const std::vector<float>& b0,
                              const std::vector<float>& w1, const std::vector<float>& b1) {
  FlowSpec f;
  f.version = version;
  f.vars = {
      {"input", "float32", {-1, 4}, "", 1, {}, {}},
      {"layer0/W", "float32", {4, 5}, f32_bytes(w0), FLOW_SPEC_LEARNABLE, {}, {{"init", "uniform"}}},
      {"layer0/b", "float32", {5}, f32_bytes(b0), FLOW_SPEC_LEARNABLE, {}, {}},
      {"layer0/MatMul:0", "float32", {-1, 5}, "", 0, {}, {}},
      {"layer0/Add:0", "float32", {-1, 5}, "", 0, {}, {}},
      {"layer0/Relu:0", "float32", {-1, 5}, "", 0, {}, {}},
      {"layer1/W", "float32", {5, 3}, f32_bytes(w1), FLOW_SPEC_LEARNABLE, {}, {}},
      {"layer1/b", "float32", {3}, f32_bytes(b1), FLOW_SPEC_LEARNABLE, {}, {}},
      {"layer1/MatMul:0", "float32", {-1, 3}, "", 0, {}, {}},
      {"logits", "float32", {-1, 3}, "", 0, {"layer1/Add:0"}, {}},
      {"output", "float32", {-1, 3}, "", FLOW_SPEC_OUT, {}, {}},
  };
  f.ops = {
      {"layer0/MatMul", "MatMul", {"input", "layer0/W"}, {"layer0/MatMul:0"}, {{"T", "float32"}}},
      {"layer0/Add", "Add", {"layer0/MatMul:0", "layer0/b"}, {"layer0/Add:0"}, {}},
      {"layer0/Relu", "Relu", {"layer0/Add:0"}, {"layer0/Relu:0"}, {}},
      {"layer1/MatMul", "MatMul", {"layer0/Relu:0", "layer1/W"}, {"layer1/MatMul:0"}, {}},
      {"layer1/Add", "Add", {"layer1/MatMul", "layer1/b"}, {"logits"}, {}},  // an input named by its op
      {"output", "Softmax", {"layer1/Add:0"}, {"output"}, {}},               // ... and by an alias
  };
  f.funcs = {{"mlp", {"layer0/MatMul", "layer0/Add", "layer0/Relu", "layer1/MatMul", "layer1/Add", "output"}}};
  f.cnxs = {{"hidden_channel", {"layer0/Relu:0"}}};  // also an output: another cell reads it
  f.blobs = {{"vocabulary", "dict", {{"size", "2"}}, "ab"}};
  return f;
}

// Every shape op of the importer in one function, for the tests and the seeds: x [2,3] is
// transposed ("perm" attribute), reshaped back (an int32 shape input), joined by ConcatV2 with a
// constant `table` [2,2] it reaches through a Reference, summed along axis 1 ("rows"), its
// maximum taken over everything ("top", a scalar), the row sums copied by Identity ("copy") and
// passed to Erf, which the flow importer does not map.
inline FlowSpec flow_shapes_spec(int version, const std::vector<float>& table) {
  FlowSpec f;
  f.version = version;
  f.vars = {
      {"instance", "resource", {}, "", FLOW_SPEC_REF},
      {"x", "float32", {2, 3}},
      {"xt", "float32", {3, 2}},
      {"shape", "int32", {2}, i32_bytes({2, 3})},
      {"xr", "float32", {2, 3}},
      {"table", "float32", {2, 2}, f32_bytes(table)},
      {"tref", "float32", {2, 2}, "", FLOW_SPEC_REF},
      {"axis", "int32", {}, i32_bytes({1})},
      {"cat", "float32", {2, 5}},
      {"rows", "float32", {2}},
      {"top", "float32", {}},
      {"copy", "float32", {2}},
      {"odd", "float32", {2}},
  };
  f.ops = {
      {"xt", "Transpose", {"x"}, {"xt"}, {{"perm", "1,0"}}},
      {"xr", "Reshape", {"xt", "shape"}, {"xr"}, {}},
      {"tref", "Reference", {"instance"}, {"tref"}, {{"var", "table"}}},
      {"cat", "ConcatV2", {"xr", "tref", "axis"}, {"cat"}, {{"N", "2"}}},
      {"rows", "Sum", {"cat"}, {"rows"}, {{"axis", "1"}}},
      {"top", "Max", {"cat"}, {"top"}, {}},
      {"copy", "Identity", {"rows"}, {"copy"}, {}},
      {"odd", "Erf", {"rows"}, {"odd"}, {}},
  };
  f.funcs = {{"shapes", {"xt", "xr", "tref", "cat", "rows", "top", "copy", "odd"}}};
  return f;
}

}  // namespace nnasm
