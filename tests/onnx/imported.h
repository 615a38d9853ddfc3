// What the ONNX import tests hold on to: a program of its own context, with the importer's report
// (the problems it listed) and its status.
#pragma once
#include "engine/context.h"
#include "isa/program.h"
#include "serialize/onnx/onnx_import.h"

namespace nnasm {

struct Imported {
  Context ctx;
  Program p{ctx};
  ImportReport report;
  Status status;
};

}  // namespace nnasm
