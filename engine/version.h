// The engine's version: the tool prints it, model files record it as their producer, and the C API
// (later) reports it. Semantic versioning; 0.x while the instruction set still grows.
#pragma once

#define NNASM_VERSION_MAJOR 0
#define NNASM_VERSION_MINOR 1
#define NNASM_VERSION_PATCH 0
#define NNASM_VERSION_STRING "0.1.0"
