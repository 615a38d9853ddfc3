/* nnasm.h — the C API of nnasm, for embedding in game engines and other hosts. Valid C99 and C++.
 *
 *   nnasm_model_options o; nnasm_model_options_init(&o);  o.log = my_log;  (or pass NULL)
 *   nnasm_model* m;        nnasm_model_load_file("policy.nnm", &o, &m);
 *   nnasm_instance* in;    nnasm_instance_create(m, &in);
 *   nnasm_instance_set_input(in, "obs", obs, sizeof obs);
 *   nnasm_instance_run(in);
 *   nnasm_instance_get_output(in, "action", act, sizeof act);
 *
 * A model (the compiled program, its generated code and its weights) is immutable once loaded and
 * shared; an instance owns everything a run writes (inputs, outputs, the activation arena, kernel
 * scratch). Any number of instances, on any threads, run one model concurrently.
 *
 * Thread safety: nnasm_version, nnasm_abi_version, nnasm_status_string, nnasm_last_error and the
 * nnasm_model_* queries may be called from any thread at any time; nnasm_model_load_* and
 * nnasm_instance_create from any thread; one instance is used by one thread at a time (calls on
 * distinct instances never need a lock). nnasm_model_free may be called while instances exist:
 * the model lives until its last instance is freed.
 *
 * Errors: every function that can fail returns an nnasm_status; nnasm_last_error() gives the
 * message of the calling thread's last failure. Nothing throws or aborts through this API, on any
 * input: a wrong name, a wrong size, a null pointer, a corrupt file.
 *
 * Determinism: the same model and inputs give bitwise-identical outputs across runs, instances,
 * threads and thread counts, at a given ISA level (NNASM_ISA or nnasm_model_options.isa).
 *
 * Allocation: loading and nnasm_instance_create allocate (and nnasm_instance_bind, the first time
 * it binds a tensor); nnasm_instance_run, _run_steps, _reset_state, _set_input, _get_output and
 * _tensor_data never do.
 */
#ifndef NNASM_H
#define NNASM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI grows without breaking a host built against an older nnasm.h:
 *   - Every struct that crosses the API begins with `uint32_t struct_size`, the sizeof the caller
 *     compiled: nnasm_model_options_init sets it for options; the caller sets it in a struct the
 *     library fills (`nnasm_tensor_info info; info.struct_size = sizeof info;`).
 *   - Structs grow only at the end, each new field at an offset no less than the previous
 *     version's sizeof (never in its tail padding), and a new field's 0 means its default.
 *   - The library reads a struct only up to struct_size: options beyond it take their defaults. A
 *     larger struct_size (a newer header) is accepted when the fields this library does not know
 *     are all 0, else NNASM_ERR_ABI. A struct the library fills is written only up to
 *     struct_size (a smaller one gets the bytes that fit), bytes past its own struct are zeroed,
 *     and struct_size becomes the bytes of fields written. A struct_size below a struct's first
 *     version, or above 4096 (an uninitialized struct), is NNASM_ERR_ABI with a message saying
 *     which.
 *   - Enums that cross the API are int32_t typedefs with named constants; numbers never change.
 *   - ABI version 1 (no struct_size; options began with `uint32_t abi_version` = 1 and the log
 *     callback took no level) still works: options whose first field is 1 are read as version 1,
 *     and the version-1 symbols nnasm_model_options_init, nnasm_model_input_info and
 *     nnasm_model_output_info keep their meaning. This header maps those names to the growable
 *     symbols below (nnasm_model_options_init_sized, nnasm_model_*_info_v2). */
#define NNASM_ABI_VERSION 2

typedef int32_t nnasm_status;
enum {
  NNASM_OK = 0,
  NNASM_ERR_INVALID_ARGUMENT = 1, /* a null pointer, a bad option value */
  NNASM_ERR_NOT_FOUND = 2,        /* no input or output of that name */
  NNASM_ERR_SIZE_MISMATCH = 3,    /* a buffer's size differs from the tensor's */
  NNASM_ERR_BAD_MODEL = 4,        /* a corrupt, truncated or unsupported model file */
  NNASM_ERR_IO = 5,               /* the file cannot be read */
  NNASM_ERR_OUT_OF_MEMORY = 6,
  NNASM_ERR_ABI = 7,              /* a struct_size or version this library does not know */
  NNASM_ERR_INTERNAL = 8,
  NNASM_ERR_NOT_READY = 9         /* out of order: an output read before any run finished */
};

/* Inputs and outputs are f32, i32, i8 or u8 (one byte an element: a quantized model's input or
   result). BF16 is a storage type a model's weights may have inside it (docs/quantization.md); a
   model whose input or output is bf16 is refused at load. */
typedef int32_t nnasm_dtype;
enum { NNASM_F32 = 0, NNASM_I32 = 1, NNASM_BF16 = 2, NNASM_I8 = 3, NNASM_U8 = 4 };

/* The instruction set level of a model's kernels. */
typedef int32_t nnasm_isa;
enum { NNASM_ISA_REF = 0, NNASM_ISA_AVX2 = 1, NNASM_ISA_AVX512 = 2 };

/* How much a log message matters; nnasm_model_options.log_level is the least severe delivered. */
typedef int32_t nnasm_log_level;
enum { NNASM_LOG_OFF = 0, NNASM_LOG_ERROR = 1, NNASM_LOG_WARN = 2, NNASM_LOG_INFO = 3, NNASM_LOG_DEBUG = 4 };

#define NNASM_MAX_RANK 6

typedef struct nnasm_tensor_info {
  uint32_t struct_size; /* set by the caller: sizeof(nnasm_tensor_info) */
  const char* name;     /* owned by the model, valid while it lives */
  nnasm_dtype dtype;
  int32_t rank;
  int64_t dims[NNASM_MAX_RANK];
  size_t bytes;         /* elements × 4 */
  size_t buffer_bytes;  /* what a buffer bound with nnasm_instance_bind must hold: bytes rounded up to 64 */
} nnasm_tensor_info;

/* `message` is valid during the call only. Called on the thread that loads or runs. */
typedef void (*nnasm_log_fn)(void* user, nnasm_log_level level, const char* message);

typedef struct nnasm_model_options {
  uint32_t struct_size; /* sizeof(nnasm_model_options): set by nnasm_model_options_init */
  int32_t threads;      /* threads for one run's big steps: 1 (default) runs each on its caller */
  const char* isa;      /* NULL: NNASM_ISA or the best level; "avx512", "avx2", "ref" cap it */
  int32_t jit;          /* 1 (default): generated kernels unless NNASM_JIT=0; 0: reference only */
  nnasm_log_fn log;     /* where the engine reports its own decisions; NULL: silent */
  void* log_user;
  /* Host-owned memory for the big blocks: weights, state, inputs, outputs, arenas, kernel scratch
   * (bookkeeping uses the C heap). alloc must return `alignment`-aligned memory (64) or NULL.
   * NULL: the C heap. Called only while loading and creating instances, never by a run. */
  void* (*alloc)(void* user, size_t bytes, size_t alignment);
  void (*free)(void* user, void* p);
  void* alloc_user;
  /* A host job system for a run's parallel steps (with threads > 1): must call fn(ctx, t) once
   * for every t in [0, n_tasks) and return when all have returned. NULL: nnasm's own threads,
   * which sleep between jobs rather than spin. */
  void (*parallel_for)(void* user, int n_tasks, void (*fn)(void* ctx, int task), void* ctx);
  void* parallel_user;
  /* Version 2. The least severe message `log` receives: NNASM_LOG_INFO (the default: a line per
   * model loaded, and warnings: a kernel the engine could not generate and ran by reference) or
   * any other level up to NNASM_LOG_DEBUG; NNASM_LOG_OFF for none. Version-1 options get INFO. */
  nnasm_log_level log_level;
} nnasm_model_options;

/* What a model is; fill with nnasm_model_metadata. */
typedef struct nnasm_model_metadata_info {
  uint32_t struct_size;    /* set by the caller: sizeof(nnasm_model_metadata_info) */
  nnasm_isa isa;           /* the level its kernels were generated for (NNASM_ISA_REF with jit 0) */
  const char* producer;    /* what wrote it ("nnasm 0.1.0 (format 1.0)"), owned by the model */
  size_t instructions;     /* in one run: nnasm_model_instruction_count */
  size_t inputs, outputs;  /* their names and shapes: nnasm_model_input_info, _output_info */
  int32_t carried_state;   /* 1: a run leaves state for the next (see nnasm_instance_reset_state) */
} nnasm_model_metadata_info;

typedef struct nnasm_model nnasm_model;
typedef struct nnasm_instance nnasm_instance;

/* The library's version ("0.1.0") and ABI version. */
const char* nnasm_version(void);
uint32_t nnasm_abi_version(void);
/* A fixed text for a status ("invalid argument"). */
const char* nnasm_status_string(nnasm_status s);
/* The message of the calling thread's last failure; "" if none. Valid until its next call. */
const char* nnasm_last_error(void);

/* Fills the first `struct_size` bytes of `o` with the defaults (0 past what this library knows)
 * and sets o->struct_size. Use the macro: nnasm_model_options_init(&o). */
void nnasm_model_options_init_sized(nnasm_model_options* o, size_t struct_size);
#define nnasm_model_options_init(o) nnasm_model_options_init_sized((o), sizeof *(o))

/* Loads a model file (.nnm) or a listing (.nnasm), compiles it for this CPU and prepares it for
 * inference. `opts` may be NULL (defaults). On failure *out is NULL. */
nnasm_status nnasm_model_load_file(const char* path, const nnasm_model_options* opts, nnasm_model** out);
/* The same from `size` bytes in memory (a game's packed assets); the bytes are not kept. */
nnasm_status nnasm_model_load_memory(const void* data, size_t size, const nnasm_model_options* opts,
                                     nnasm_model** out);
/* Releases the caller's reference; NULL is ignored. */
void nnasm_model_free(nnasm_model* m);

nnasm_status nnasm_model_input_count(const nnasm_model* m, size_t* count);
nnasm_status nnasm_model_output_count(const nnasm_model* m, size_t* count);
/* Input or output `index` (info->struct_size set by the caller); NNASM_ERR_NOT_FOUND past the end. */
nnasm_status nnasm_model_input_info_v2(const nnasm_model* m, size_t index, nnasm_tensor_info* info);
nnasm_status nnasm_model_output_info_v2(const nnasm_model* m, size_t index, nnasm_tensor_info* info);
#define nnasm_model_input_info nnasm_model_input_info_v2
#define nnasm_model_output_info nnasm_model_output_info_v2
/* Instructions in one run (the unit of nnasm_instance_run_steps). */
nnasm_status nnasm_model_instruction_count(const nnasm_model* m, size_t* count);
/* What the model is: producer, size, inputs and outputs, ISA level, carried state
 * (info->struct_size set by the caller). */
nnasm_status nnasm_model_metadata(const nnasm_model* m, nnasm_model_metadata_info* info);

/* A new instance of `m` with its own inputs, outputs and arena. */
nnasm_status nnasm_instance_create(nnasm_model* m, nnasm_instance** out);
void nnasm_instance_free(nnasm_instance* in);

/* Copies `bytes` bytes (exactly the input's size) into input `name`. */
nnasm_status nnasm_instance_set_input(nnasm_instance* in, const char* name, const void* data, size_t bytes);
/* Copies output `name` (exactly `bytes` bytes) out after a run: NNASM_ERR_NOT_READY before the
 * instance's first run has finished, and while a run that run_steps started is unfinished. */
nnasm_status nnasm_instance_get_output(nnasm_instance* in, const char* name, void* data, size_t bytes);
/* Zero copy: where input or output `name` lives in this instance (64-byte aligned, valid while the
 * instance lives), and its size. Write inputs there before a run; read outputs after it. */
nnasm_status nnasm_instance_tensor_data(nnasm_instance* in, const char* name, void** data, size_t* bytes);
/* Zero copy from the caller's side: runs read input (or write output) `name` directly in
 * `buffer`, which must be 64-byte aligned and hold at least the tensor's buffer_bytes (kernels
 * touch whole 64-byte lines); the caller keeps it alive while bound. NULL unbinds. A misaligned
 * buffer is NNASM_ERR_INVALID_ARGUMENT, a short one NNASM_ERR_SIZE_MISMATCH: copy instead. */
nnasm_status nnasm_instance_bind(nnasm_instance* in, const char* name, void* buffer, size_t bytes);
/* One whole forward run, inference mode (abandoning a run that run_steps left unfinished). */
nnasm_status nnasm_instance_run(nnasm_instance* in);
/* Sets the state a run leaves for the next (a recurrent layer's h and c stepped once per frame,
 * the listing's ASSIGN destinations) back to its initial values, as a new instance starts: call
 * it when the sequence starts over (a character respawns). Each instance keeps its own such
 * state; other state and the weights are left alone. Abandons a run that run_steps left
 * unfinished. Never allocates; a model without such state makes it a no-op. */
nnasm_status nnasm_instance_reset_state(nnasm_instance* in);
/* Runs at most `max_instructions` instructions of the run in progress (starting one when none is)
 * and returns; *done becomes 1 when the run finished, else 0. Spreads a big model over frames. */
nnasm_status nnasm_instance_run_steps(nnasm_instance* in, size_t max_instructions, int* done);

/* Prepares this instance again at batch `batch`: every input's leading dimension becomes `batch`
 * and the shapes that follow from it are inferred again (kernels generated for them). The model
 * and its other instances are unchanged; the weights stay shared. From then on this instance's
 * inputs and outputs have the new sizes (nnasm_instance_input_info/_output_info; the model's
 * infos keep the model's batch); earlier bindings, outputs and carried state are dropped. A
 * program whose batch cannot change (inputs without a common leading dimension, a reshape that
 * mixes the batch into other dimensions, ...) is NNASM_ERR_INVALID_ARGUMENT with the reason in
 * nnasm_last_error(), the instance unchanged; so is batch < 1. Allocates; writes the model's
 * shared tensor map, so no other thread may use the model or its instances meanwhile. */
nnasm_status nnasm_instance_set_batch(nnasm_instance* in, int64_t batch);
/* This instance's inputs and outputs: the model's, or their sizes at the instance's batch. Set
 * info->struct_size as for nnasm_model_input_info. */
nnasm_status nnasm_instance_input_info(const nnasm_instance* in, size_t index, nnasm_tensor_info* info);
nnasm_status nnasm_instance_output_info(const nnasm_instance* in, size_t index, nnasm_tensor_info* info);

#ifdef __cplusplus
}
#endif

#endif /* NNASM_H */
