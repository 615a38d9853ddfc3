/* game_loop.c — nnasm from plain C, the way a game uses it: 1,000 agents each run a small policy
 * network (32 -> 64 -> 64 -> 8, ReLU, softmax) every frame, spread over worker threads. One model
 * is loaded (here from a listing in memory, as a game loads from its packed assets) and shared;
 * every agent has an instance of its own. With no arguments it runs 3 seconds of frames on every
 * core and prints frames/s, the mean and p99 frame time and the per-agent inference time.
 *
 *   build/samples/game_loop [--threads N] [--seconds S] [--agents N]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nnasm.h"

/* The policy as a listing: weights initialized from the model's seed (a real game would ship a
 * trained .nnm file instead and call nnasm_model_load_file or _load_memory on its bytes). */
static const char kPolicy[] =
    "input  %obs : f32[1,32]\n"
    "param  @w1 : f32[32,64]  init=he_normal\n"
    "param  @b1 : f32[64]     init=zeros\n"
    "param  @w2 : f32[64,64]  init=he_normal\n"
    "param  @b2 : f32[64]     init=zeros\n"
    "param  @w3 : f32[64,8]   init=xavier_uniform\n"
    "param  @b3 : f32[8]      init=zeros\n"
    "output %action\n"
    "\n"
    "forward:\n"
    "  LINEAR  %obs, @w1, @b1 -> %h1  act=relu\n"
    "  LINEAR  %h1, @w2, @b2 -> %h2  act=relu\n"
    "  LINEAR  %h2, @w3, @b3 -> %z\n"
    "  SOFTMAX %z -> %action  axis=-1\n";

enum { OBS = 32, ACTIONS = 8, MAX_THREADS = 256, MAX_FRAMES = 1 << 20 };

typedef struct {
  nnasm_instance* instance;
  float obs[OBS];
  float action[ACTIONS];
  int choice;
} Agent;

typedef struct {
  Agent* agents;
  int first, count;
  pthread_barrier_t* start;
  pthread_barrier_t* done;
  volatile int* frame;  /* -1: stop */
  double busy;          /* seconds spent in set_input + run + get_output */
  long runs;
  int failed;
} Worker;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int check(nnasm_status s, const char* what) {
  if (s == NNASM_OK) return 0;
  fprintf(stderr, "game_loop: %s: %s: %s\n", what, nnasm_status_string(s), nnasm_last_error());
  return 1;
}

/* The engine's own reports (a kernel it could not generate) go to the game's log. */
static void on_log(void* user, nnasm_log_level level, const char* message) {
  (void)user;
  fprintf(stderr, "game_loop: nnasm %s: %s\n", level <= NNASM_LOG_WARN ? "warning" : "note", message);
}

/* What an agent sees this frame (the game's work, not the network's). */
static void observe(Agent* a, int frame, int index) {
  int i;
  for (i = 0; i < OBS; ++i) a->obs[i] = (float)sin(0.01 * frame + 0.37 * index + 0.5 * i);
}

/* One agent's decision: the network's input, run and output, and the best action. */
static int think(Agent* a) {
  int i, best = 0;
  if (nnasm_instance_set_input(a->instance, "obs", a->obs, sizeof a->obs) != NNASM_OK) return 1;
  if (nnasm_instance_run(a->instance) != NNASM_OK) return 1;
  if (nnasm_instance_get_output(a->instance, "action", a->action, sizeof a->action) != NNASM_OK) return 1;
  for (i = 1; i < ACTIONS; ++i)
    if (a->action[i] > a->action[best]) best = i;
  a->choice = best;
  return 0;
}

static void* work(void* arg) {
  Worker* w = (Worker*)arg;
  int failed = 0;
  for (;;) {
    int frame, k;
    double t0;
    pthread_barrier_wait(w->start);
    frame = *w->frame;
    if (frame < 0) break;
    for (k = 0; k < w->count; ++k) observe(&w->agents[w->first + k], frame, w->first + k);
    t0 = now();
    /* Accumulated locally: the workers' records share cache lines, and a store per agent into
     * them would bounce those lines between cores (false sharing). */
    for (k = 0; k < w->count; ++k) failed |= think(&w->agents[w->first + k]);
    w->busy += now() - t0;
    w->runs += w->count;
    pthread_barrier_wait(w->done);
  }
  w->failed = failed;
  return NULL;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores > 0 ? (int)cores : 1, agents = 1000, i, frames = 0, failed = 0;
  double seconds = 3, start, busy = 0, sum = 0;
  long runs = 0;
  double* frame_time;
  volatile int frame = 0;
  nnasm_model* model = NULL;
  nnasm_model_options opts;
  nnasm_model_metadata_info meta;
  Agent* all;
  Worker workers[MAX_THREADS];
  pthread_t tid[MAX_THREADS];
  pthread_barrier_t go, done;

  for (i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--agents")) agents = atoi(argv[i + 1]);
    else break;
  }
  if (i < argc || threads < 1 || threads > MAX_THREADS || !(seconds > 0) || agents < 1) {
    fprintf(stderr, "usage: %s [--threads 1..%d] [--seconds S] [--agents N]\n", argv[0], MAX_THREADS);
    return 1;
  }
  if (threads > agents) threads = agents;

  /* One model, shared; each run stays on the thread that calls it (threads = 1). */
  nnasm_model_options_init(&opts); /* sets struct_size: set options only after it */
  opts.log = on_log;
  opts.log_level = NNASM_LOG_WARN; /* fallbacks only, not a line per load */
  if (check(nnasm_model_load_memory(kPolicy, sizeof kPolicy - 1, &opts, &model), "load")) return 1;
  meta.struct_size = sizeof meta; /* what this build of the game knows of the struct */
  if (check(nnasm_model_metadata(model, &meta), "metadata")) return 1;
  all = (Agent*)calloc((size_t)agents, sizeof *all);
  frame_time = (double*)malloc(sizeof(double) * MAX_FRAMES);
  if (!all || !frame_time) return 1;
  for (i = 0; i < agents; ++i)
    if (check(nnasm_instance_create(model, &all[i].instance), "instance")) return 1;

  pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
  pthread_barrier_init(&done, NULL, (unsigned)threads + 1);
  for (i = 0; i < threads; ++i) {
    Worker* w = &workers[i];
    memset(w, 0, sizeof *w);
    w->agents = all;
    w->first = (int)((long)agents * i / threads);
    w->count = (int)((long)agents * (i + 1) / threads) - w->first;
    w->start = &go;
    w->done = &done;
    w->frame = &frame;
    pthread_create(&tid[i], NULL, work, w);
  }

  start = now();
  while (frames < MAX_FRAMES && now() - start < seconds) {
    const double t0 = now();
    frame = frames;
    pthread_barrier_wait(&go);
    pthread_barrier_wait(&done);
    frame_time[frames++] = now() - t0;
  }
  frame = -1;
  pthread_barrier_wait(&go);
  for (i = 0; i < threads; ++i) {
    pthread_join(tid[i], NULL);
    busy += workers[i].busy;
    runs += workers[i].runs;
    failed |= workers[i].failed;
  }
  if (failed) return check(NNASM_ERR_INTERNAL, "run");

  for (i = 0; i < frames; ++i) sum += frame_time[i];
  qsort(frame_time, (size_t)frames, sizeof *frame_time, by_value);
  printf("game loop: %d agents, policy 32-64-64-8 (%lu instructions, %s kernels), %d thread%s, nnasm %s\n", agents,
         (unsigned long)meta.instructions, meta.isa == NNASM_ISA_AVX512 ? "avx512" : meta.isa == NNASM_ISA_AVX2 ? "avx2" : "reference",
         threads, threads == 1 ? "" : "s", nnasm_version());
  printf("frames: %d in %.2f s: %.0f frames/s, frame time mean %.3f ms, p99 %.3f ms\n", frames, now() - start,
         frames / sum, 1e3 * sum / frames, 1e3 * frame_time[(size_t)((frames - 1) * 0.99)]);
  printf("per-agent inference: %.2f us (set input, run, get output, argmax; mean over %ld runs)\n", 1e6 * busy / (double)runs,
         runs);
  printf("agent 0 chose action %d\n", all[0].choice);

  for (i = 0; i < agents; ++i) nnasm_instance_free(all[i].instance);
  nnasm_model_free(model);
  free(all);
  free(frame_time);
  return 0;
}
