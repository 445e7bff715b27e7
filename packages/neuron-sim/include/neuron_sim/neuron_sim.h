/*
 * neuron_sim: the C API of the simulated Trainium device.
 *
 * One runtime instance exists per process (the shared library libneuron_sim.so).
 * Every other package (the PyTorch backend, the collective library, the kernel
 * simulator) talks to the device through this header only.
 *
 * Conventions
 * -----------
 * - Every function returns an nsimError. NSIM_SUCCESS is 0. On failure the
 *   calling thread's last-error message (nsimGetLastErrorMessage) says what was
 *   wrong: the call, the device, the sizes, and what to change.
 * - Devices are the *visible* logical NeuronCores, numbered 0..count-1
 *   (NEURON_RT_VISIBLE_CORES selects them; see nsimEnvVar*).
 * - Thread safety: every function may be called from any thread at any time
 *   after nsimInit. The last-error message is thread-local. Queues and events
 *   may be used from several threads; operations on one queue are ordered in
 *   the order their calls return.
 * - Ownership: the caller owns what it creates (device and host allocations,
 *   queues, events) and must release it with the matching free/destroy call.
 *   Strings returned by the runtime are owned by the runtime and stay valid
 *   until nsimShutdown (or, for the last-error message, until the next failing
 *   call on the same thread).
 *
 * Execution model
 * ---------------
 * Work runs synchronously on the calling host thread: when a copy, memset or
 * launch returns, its effect on memory is complete. Separately, each operation
 * occupies its queue's *simulated* timeline for a modelled duration: it starts
 * when the queue is free (and after every event the queue waits on) and ends
 * duration later. Events capture the simulated time at which all earlier work on
 * their queue ends; elapsed times are differences of simulated times. Host
 * time never enters the simulated clock.
 *
 * Device memory
 * -------------
 * Pointers returned by nsimMalloc are device addresses in a reserved range the
 * host cannot access: a host load or store faults at once, and the runtime's
 * fault handler prints the allocation touched (or says the address is
 * unallocated) before the process ends as with a segmentation fault. Runtime
 * components reach the bytes through nsimDeviceToHost, a private alias computed
 * by pointer arithmetic.
 */
#ifndef NEURON_SIM_H
#define NEURON_SIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NSIM_API __attribute__((visibility("default")))
#else
#define NSIM_API
#endif

#define NSIM_API_VERSION 1

/* ------------------------------------------------------------------ errors */
typedef enum nsimError {
  NSIM_SUCCESS = 0,
  NSIM_ERROR_NOT_INITIALIZED = 1,   /* call before nsimInit, or after nsimShutdown */
  NSIM_ERROR_INVALID_VALUE = 2,     /* an argument is out of range (size 0, NULL out-pointer...) */
  NSIM_ERROR_INVALID_DEVICE = 3,    /* device index not in 0..count-1 */
  NSIM_ERROR_OUT_OF_MEMORY = 4,     /* device capacity exceeded (or an injected allocation failure) */
  NSIM_ERROR_INVALID_POINTER = 5,   /* pointer not returned by the runtime, or already freed */
  NSIM_ERROR_INVALID_COPY = 6,      /* copy kind does not match the pointers, or range out of bounds */
  NSIM_ERROR_INVALID_QUEUE = 7,     /* queue handle unknown or destroyed */
  NSIM_ERROR_INVALID_EVENT = 8,     /* event handle unknown or destroyed */
  NSIM_ERROR_NOT_READY = 9,         /* query: work not complete (also: event never recorded, for elapsed time) */
  NSIM_ERROR_LAUNCH_FAILED = 10,    /* a launch failed (injected fault, or the host function reported failure) */
  NSIM_ERROR_DEVICE_LOST = 11,      /* the device is lost; every later call on it fails */
  NSIM_ERROR_TIMING_DISABLED = 12,  /* elapsed time asked of an event created without timing */
  NSIM_ERROR_CONFIG = 13,           /* invalid environment configuration (message names the variable) */
  NSIM_ERROR_FORKED_CHILD = 14      /* called in a child forked after nsimInit: device memory is the parent's */
} nsimError;

NSIM_API const char* nsimGetErrorName(nsimError err);
/* Message of the last failing call on this thread ("" if none). */
NSIM_API const char* nsimGetLastErrorMessage(void);
/* Clears this thread's last error and returns its code. */
NSIM_API nsimError nsimGetLastError(void);

/* --------------------------------------------------------- init / devices */
/* Reads the environment, builds the device list, installs the fault handler.
 * Idempotent: later calls return NSIM_SUCCESS (or the first call's error). */
NSIM_API nsimError nsimInit(void);
/* Frees every device allocation, queue and event. Init may be called again. */
NSIM_API nsimError nsimShutdown(void);
NSIM_API int nsimIsInitialized(void);
/* 1 in a process forked from one that had initialised the runtime. Device memory is a shared
 * mapping, so parent and child would hand out the same device addresses over the same pages:
 * in such a child every call fails with NSIM_ERROR_FORKED_CHILD, except nsimFree (a no-op: the
 * memory is the parent's) and nsimShutdown, after which nsimInit gives the child a private
 * runtime of its own. */
NSIM_API int nsimIsForkedChild(void);
NSIM_API nsimError nsimGetDeviceCount(int* count);

typedef struct nsimDeviceProperties {
  char name[64];              /* e.g. "Trainium2 NC-v3 (LNC=2)" */
  char profile[16];           /* "trn1" | "trn2" | "trn3" */
  int device;                 /* visible index */
  int chip;                   /* chip the logical core belongs to */
  int logical_core;           /* global logical core id (the NEURON_RT_VISIBLE_CORES number) */
  int lnc;                    /* physical NeuronCores per logical core */
  int physical_cores_per_chip;
  int logical_cores_per_chip;
  uint64_t hbm_capacity;      /* bytes of HBM available to this logical core */
  double hbm_bandwidth;       /* bytes/s, this logical core's share */
  double host_link_bandwidth; /* bytes/s, host <-> device DMA, per direction */
  double peak_flops_bf16;     /* FLOP/s of this logical core's TensorE(s), dense BF16 */
  double peak_flops_fp32;     /* FLOP/s, FP32 */
  double peak_flops_fp8;      /* FLOP/s, FP8 */
  double vector_flops_fp32;   /* FLOP/s of VectorE, FP32 */
  double tensor_clock_hz;
  double vector_clock_hz;
  double scalar_clock_hz;
  double gpsimd_clock_hz;
  int sbuf_partitions;        /* 128 */
  uint64_t sbuf_bytes_per_partition;
  uint64_t psum_bytes_per_partition;
  int psum_banks;
  int dma_engines;            /* per physical core */
  double dma_engine_bandwidth;/* bytes/s per DMA engine */
  double dma_fixed_overhead_ns;
  double launch_overhead_ns;  /* fixed device-side cost of one kernel launch */
  double chip_link_bandwidth; /* bytes/s per chip, chip-to-chip (NeuronLink) */
  int compute_capability_major; /* NeuronCore version: 2, 3, 4 */
  int compute_capability_minor;
} nsimDeviceProperties;

NSIM_API nsimError nsimGetDeviceProperties(int device, nsimDeviceProperties* props);

/* ------------------------------------------------------------ device memory */
/* Allocates size bytes (size > 0) of device memory on `device`, aligned to
 * NSIM_ALIGNMENT. Fails with NSIM_ERROR_OUT_OF_MEMORY naming requested, in use
 * and capacity. Host pages behind the allocation are reserved on first touch. */
#define NSIM_ALIGNMENT 512
NSIM_API nsimError nsimMalloc(int device, size_t size, void** ptr);
/* Frees a pointer returned by nsimMalloc. NULL is accepted and ignored.
 * Double free and foreign pointers fail with NSIM_ERROR_INVALID_POINTER. */
NSIM_API nsimError nsimFree(void* ptr);
NSIM_API nsimError nsimMemGetInfo(int device, size_t* free_bytes, size_t* total_bytes);

typedef enum nsimMemoryType {
  NSIM_MEMORY_UNREGISTERED = 0, /* not known to the runtime */
  NSIM_MEMORY_HOST = 1,         /* pinned host memory from nsimMallocHost */
  NSIM_MEMORY_DEVICE = 2,       /* inside a live device allocation */
  NSIM_MEMORY_DEVICE_UNALLOCATED = 3 /* inside a device's range, but in no live allocation */
} nsimMemoryType;

typedef struct nsimPointerAttributes {
  nsimMemoryType type;
  int device;        /* for DEVICE / DEVICE_UNALLOCATED; -1 otherwise */
  void* base;        /* start of the allocation containing the pointer */
  size_t size;       /* its size */
} nsimPointerAttributes;
/* Never fails for an arbitrary address (an unknown one is UNREGISTERED). */
NSIM_API nsimError nsimPointerGetAttributes(const void* ptr, nsimPointerAttributes* attr);

/* The private host alias of a device pointer: the address through which
 * runtime components (host execution, copies) reach the bytes. The range
 * [ptr, ptr+size) must lie in one live allocation. */
NSIM_API nsimError nsimDeviceToHost(const void* device_ptr, size_t size, void** host_alias);
/* Unchecked O(1) translation for hot paths that already validated the range.
 * Returns NULL for addresses outside every device range. */
NSIM_API void* nsimDeviceToHostUnchecked(const void* device_ptr);
/* The inverse: device address of a host alias (NULL if not an alias address). */
NSIM_API void* nsimHostToDeviceUnchecked(const void* host_alias);
/* Device whose address range holds device_ptr, or -1; O(1), no lock, does not check
 * that the address is allocated (allocator free paths that own the pointer). */
NSIM_API int nsimDeviceOfUnchecked(const void* device_ptr);

/* ------------------------------------------------------ pinned host memory */
NSIM_API nsimError nsimMallocHost(size_t size, void** ptr);
NSIM_API nsimError nsimFreeHost(void* ptr);

struct nsimEvent_st;

/* --------------------------------------------------------------- queues */
typedef struct nsimQueue_st* nsimQueue;
/* Lower value = higher priority, as in CUDA: greatest is -1, least is 0. */
NSIM_API nsimError nsimQueueGetPriorityRange(int* least, int* greatest);
NSIM_API nsimError nsimQueueCreate(int device, int priority, nsimQueue* queue);
NSIM_API nsimError nsimQueueDestroy(nsimQueue queue);
/* The device's default queue: exists while the runtime is initialised, never
 * destroyed by the caller. Synchronous copies and memsets run on it. */
NSIM_API nsimError nsimQueueGetDefault(int device, nsimQueue* queue);
NSIM_API nsimError nsimQueueGetInfo(nsimQueue queue, int* device, int* priority, uint64_t* id);
/* Simulated time (ns since init) at which all work queued so far ends. */
NSIM_API nsimError nsimQueueGetTime(nsimQueue queue, double* time_ns);
NSIM_API nsimError nsimQueueSynchronize(nsimQueue queue);
NSIM_API nsimError nsimQueueQuery(nsimQueue queue); /* SUCCESS: idle */
/* Later work on `queue` starts no earlier than the time `event` captured. */
NSIM_API nsimError nsimQueueWaitEvent(nsimQueue queue, struct nsimEvent_st* event);
NSIM_API nsimError nsimDeviceSynchronize(int device);
/* Simulated time at which every queue of the device is idle. */
NSIM_API nsimError nsimDeviceGetTime(int device, double* time_ns);

/* --------------------------------------------------------------- events */
typedef struct nsimEvent_st* nsimEvent;
#define NSIM_EVENT_DEFAULT 0u
#define NSIM_EVENT_DISABLE_TIMING 1u
NSIM_API nsimError nsimEventCreate(int device, unsigned flags, nsimEvent* event);
NSIM_API nsimError nsimEventDestroy(nsimEvent event);
NSIM_API nsimError nsimEventRecord(nsimEvent event, nsimQueue queue);
NSIM_API nsimError nsimEventQuery(nsimEvent event);       /* SUCCESS: complete */
NSIM_API nsimError nsimEventSynchronize(nsimEvent event);
/* Simulated time captured by the last record (NSIM_ERROR_NOT_READY if never recorded). */
NSIM_API nsimError nsimEventGetTime(nsimEvent event, double* time_ns);
/* Milliseconds of simulated time from start to end; both recorded, both timed. */
NSIM_API nsimError nsimEventElapsedTime(float* ms, nsimEvent start, nsimEvent end);

/* ----------------------------------------------------------- copies, memset */
typedef enum nsimMemcpyKind {
  NSIM_MEMCPY_HOST_TO_HOST = 0,
  NSIM_MEMCPY_HOST_TO_DEVICE = 1,
  NSIM_MEMCPY_DEVICE_TO_HOST = 2,
  NSIM_MEMCPY_DEVICE_TO_DEVICE = 3,
  NSIM_MEMCPY_DEFAULT = 4 /* inferred from the pointers */
} nsimMemcpyKind;
/* Checked: device ranges must lie inside live allocations; the kind must match
 * the pointers. Device-to-device copies may cross devices (peer copy). The
 * synchronous forms run on the default queue of the device involved (the
 * destination's for device-to-device). */
NSIM_API nsimError nsimMemcpy(void* dst, const void* src, size_t size, nsimMemcpyKind kind);
NSIM_API nsimError nsimMemcpyAsync(void* dst, const void* src, size_t size, nsimMemcpyKind kind,
                                   nsimQueue queue);
/* nsimMemcpyAsync's checks, counters and timeline entry without moving any byte: the copy of
 * a buffer that holds no values (shape-only execution of a program). */
NSIM_API nsimError nsimMemcpyTimelineAsync(void* dst, const void* src, size_t size, nsimMemcpyKind kind,
                                           nsimQueue queue);
NSIM_API nsimError nsimMemset(void* device_ptr, int value, size_t size);
NSIM_API nsimError nsimMemsetAsync(void* device_ptr, int value, size_t size, nsimQueue queue);

/* ---------------------------------------------------------------- launches */
/* Names are interned once; launches refer to them by id (cheap to record). */
NSIM_API nsimError nsimRegisterName(const char* name, uint32_t* name_id);
NSIM_API const char* nsimGetName(uint32_t name_id); /* NULL if unknown */

typedef enum nsimLaunchKind {
  NSIM_LAUNCH_KERNEL = 0,     /* native kernel */
  NSIM_LAUNCH_FALLBACK = 1,   /* op executed on the host (bounces through host memory on a chip) */
  NSIM_LAUNCH_COLLECTIVE = 2,
  NSIM_LAUNCH_MEMCPY = 3,
  NSIM_LAUNCH_MEMSET = 4,
  NSIM_LAUNCH_HOST_FUNC = 5
} nsimLaunchKind;

/* Host function run by a launch. Returns 0 on success; non-zero makes the
 * launch fail with NSIM_ERROR_LAUNCH_FAILED. */
typedef int (*nsimHostFn)(void* user_data);

/* Runs fn(user_data) now (fn may be NULL: record only) and places
 * [start, start + duration_ns) on the queue's timeline. Fails without running
 * fn when the device is lost or a fault is injected for this name. */
NSIM_API nsimError nsimLaunch(nsimQueue queue, uint32_t name_id, nsimLaunchKind kind,
                              double duration_ns, nsimHostFn fn, void* user_data);
/* Whether the next nsimLaunch of `name_id` on `device` fails by an injected fault
 * (NEURON_SIM_FAULT_KERNEL, NEURON_SIM_FAULT_DEVICE_LOST), without consuming it: 1 if it
 * would, 0 if not. A caller that computes on the host before it launches asks first, so a
 * failed launch changes no memory. Two relaxed loads when nothing is armed. */
NSIM_API int nsimLaunchWouldFail(int device, uint32_t name_id);
/* Modelled duration of a host<->device or device<->device transfer of `bytes`. */
NSIM_API nsimError nsimModelCopyDuration(int device, nsimMemcpyKind kind, size_t bytes,
                                         double* duration_ns);

/* ------------------------------------------------------------ cost model */
/* The model that produced a launch's duration (kept on its timeline record). */
typedef enum nsimCostModel {
  NSIM_MODEL_UNSPECIFIED = 0,    /* nsimLaunch: the caller gave the duration */
  NSIM_MODEL_KERNEL_SCHEDULE = 1,/* the kernel's simulated engine schedule + launch overhead */
  NSIM_MODEL_ROOFLINE = 2,       /* launch overhead + max(flops / peak, bytes / HBM bandwidth) */
  NSIM_MODEL_HOST_ROUND_TRIP = 3,/* roofline + operands over the host link (an op run on the host) */
  NSIM_MODEL_COPY = 4,           /* copy / memset model */
  NSIM_MODEL_INTERCONNECT = 5    /* collective: neuron_ccl's interconnect model */
} nsimCostModel;

/* Operand precision, which selects the engine peak a roofline divides by. */
typedef enum nsimDtypeClass {
  NSIM_DTYPE_FP32 = 0,   /* float32 (and anything run at the FP32 rate: float64, complex) */
  NSIM_DTYPE_BF16 = 1,   /* bfloat16, float16 */
  NSIM_DTYPE_FP8 = 2,    /* float8 e4m3 / e5m2 */
  NSIM_DTYPE_INT = 3,    /* integer and bool: vector engine only */
  NSIM_DTYPE_NONE = 4    /* no operands (copies of raw bytes, collectives of several dtypes) */
} nsimDtypeClass;

/* Which engine does the arithmetic of a roofline-costed launch. */
typedef enum nsimComputeClass {
  NSIM_COMPUTE_VECTOR = 0, /* elementwise, reductions: VectorE FP32 rate */
  NSIM_COMPUTE_TENSOR = 1  /* matmul, convolution: TensorE at the dtype's peak */
} nsimComputeClass;

/* Engines of a kernel schedule, in the order of nsimLaunchCost.engine_busy_ns. */
typedef enum nsimEngine {
  NSIM_ENGINE_TENSOR = 0, NSIM_ENGINE_VECTOR = 1, NSIM_ENGINE_SCALAR = 2, NSIM_ENGINE_GPSIMD = 3,
  NSIM_ENGINE_DMA = 4
} nsimEngine;
#define NSIM_ENGINE_COUNT 5

/* What a launch's duration is computed from. Zero-initialise, then fill. */
typedef struct nsimLaunchCost {
  uint32_t model;          /* nsimCostModel: KERNEL_SCHEDULE, ROOFLINE, HOST_ROUND_TRIP or
                              INTERCONNECT / UNSPECIFIED (duration_ns given) */
  uint32_t dtype_class;    /* nsimDtypeClass */
  uint32_t compute;        /* nsimComputeClass (roofline models) */
  uint32_t detail_id;      /* interned name (nsimRegisterName) detailing the launch, e.g. a
                              collective's algorithm; 0 if none */
  double flops;            /* arithmetic of the op as counted for MFU */
  double bytes_read;       /* device operand bytes read */
  double bytes_written;    /* device result bytes written */
  double duration_ns;      /* KERNEL_SCHEDULE: the schedule's latency (launch overhead is added);
                              INTERCONNECT / UNSPECIFIED: the whole duration */
  double engine_busy_ns[NSIM_ENGINE_COUNT]; /* KERNEL_SCHEDULE: busy time of each engine */
} nsimLaunchCost;

/* Modelled device duration of a launch on `device` with these cost inputs:
 *   KERNEL_SCHEDULE: launch overhead + duration_ns;
 *   ROOFLINE:        launch overhead + max(flops / peak(compute, dtype_class), bytes / HBM BW);
 *   HOST_ROUND_TRIP: ROOFLINE + bytes / host link BW + one DMA setup per direction;
 *   INTERCONNECT / UNSPECIFIED: duration_ns.
 * The figures are the device profile's (nsimDeviceProperties; sources in profiles.cpp). */
NSIM_API nsimError nsimModelLaunchDuration(int device, const nsimLaunchCost* cost,
                                           double* duration_ns);
/* nsimLaunch with the duration from nsimModelLaunchDuration; the cost inputs are kept on the
 * timeline record. *duration_ns (may be NULL) receives the modelled duration. */
NSIM_API nsimError nsimLaunchWithCost(nsimQueue queue, uint32_t name_id, nsimLaunchKind kind,
                                      const nsimLaunchCost* cost, nsimHostFn fn, void* user_data,
                                      double* duration_ns);

/* Correlation of launches with the host operation that issued them: every record placed
 * while an id is pushed on the calling thread carries the innermost one (0 when none). */
NSIM_API nsimError nsimCorrelationPush(uint64_t id);
NSIM_API nsimError nsimCorrelationPop(void);

/* ---------------------------------------------------------------- timeline */
typedef struct nsimTimelineRecord {
  uint32_t name_id;
  uint32_t kind;      /* nsimLaunchKind */
  int32_t device;
  uint64_t queue_id;
  double start_ns;
  double end_ns;
  uint64_t bytes;     /* copies/memsets: bytes moved; 0 otherwise */
  uint32_t model;     /* nsimCostModel that produced the duration */
  uint32_t dtype_class; /* nsimDtypeClass */
  double flops;
  double bytes_read;
  double bytes_written;
  double engine_busy_ns[NSIM_ENGINE_COUNT]; /* kernel schedules; 0 otherwise */
  uint64_t correlation_id; /* innermost nsimCorrelationPush id of the launching thread, or 0 */
  uint64_t sequence;  /* per-device placement order, from 1 */
  int64_t host_ns;    /* host wall clock (ns since the Unix epoch) when the launch was placed */
  uint32_t detail_id; /* nsimLaunchCost.detail_id, 0 if none */
  uint32_t reserved;
} nsimTimelineRecord;

/* Recording is on by default (NEURON_SIM_TIMELINE). The newest
 * NEURON_SIM_TIMELINE_CAPACITY records per device are kept. */
NSIM_API nsimError nsimTimelineSetEnabled(int enabled);
NSIM_API nsimError nsimTimelineGetCount(int device, size_t* count);
/* Copies up to `capacity` records (oldest first) into out; *written = number copied. */
NSIM_API nsimError nsimTimelineGetRecords(int device, nsimTimelineRecord* out, size_t capacity,
                                          size_t* written);
NSIM_API nsimError nsimTimelineClear(int device); /* -1: every device */
/* Chrome trace (chrome://tracing, Perfetto) of every device's records. */
NSIM_API nsimError nsimTimelineExportChromeTrace(const char* path);

/* ---------------------------------------------------------------- counters */
typedef struct nsimCounters {
  uint64_t live_allocations;
  uint64_t bytes_in_use;
  uint64_t peak_bytes_in_use;
  uint64_t total_allocations;  /* successful nsimMalloc calls */
  uint64_t total_frees;
  uint64_t failed_allocations;
  uint64_t memcpy_h2d, memcpy_d2h, memcpy_d2d;       /* calls */
  uint64_t bytes_h2d, bytes_d2h, bytes_d2d;
  uint64_t memsets;
  uint64_t launches;
  uint64_t live_queues;        /* created and not destroyed (default queue excluded) */
  uint64_t live_events;
} nsimCounters;
NSIM_API nsimError nsimGetCounters(int device, nsimCounters* counters);
NSIM_API nsimError nsimResetPeakCounters(int device);
/* Pinned host memory counters (process-wide). */
NSIM_API nsimError nsimGetHostCounters(uint64_t* live_allocations, uint64_t* bytes_in_use);

/* ---------------------------------------------------------- fault injection */
/* The n-th (1-based) nsimMalloc from now on, on any device, fails with
 * NSIM_ERROR_OUT_OF_MEMORY; n = 0 disarms. */
NSIM_API nsimError nsimFaultFailNthAlloc(uint64_t n);
/* The next `count` launches of kernel `name` fail (count < 0: every launch). */
NSIM_API nsimError nsimFaultFailKernel(const char* name, int count);
/* Marks the device lost: every later call that uses it fails with
 * NSIM_ERROR_DEVICE_LOST until nsimShutdown. */
NSIM_API nsimError nsimFaultSetDeviceLost(int device);
NSIM_API nsimError nsimFaultClear(void); /* disarms allocation and kernel faults */

/* -------------------------------------------------- environment registry */
typedef enum nsimEnvType { NSIM_ENV_STRING = 0, NSIM_ENV_INT = 1, NSIM_ENV_BOOL = 2,
                           NSIM_ENV_CORE_LIST = 3, NSIM_ENV_BYTES = 4 } nsimEnvType;
typedef struct nsimEnvVar {
  const char* name;
  nsimEnvType type;
  const char* default_value; /* as text */
  const char* meaning;
} nsimEnvVar;
/* Every environment variable the runtime reads, in one table. */
NSIM_API size_t nsimEnvVarCount(void);
NSIM_API const nsimEnvVar* nsimEnvVarGet(size_t index);

/* --------------------------------------------------------------- profiles */
/* Names of the built-in profiles ("trn1", "trn2", "trn3"). */
NSIM_API size_t nsimProfileCount(void);
NSIM_API const char* nsimProfileName(size_t index);
/* Properties of logical core 0 of profile `name` with the given LNC (0: the
 * profile's default), independent of the active configuration. */
NSIM_API nsimError nsimProfileGetProperties(const char* name, int lnc, nsimDeviceProperties* props);

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* NEURON_SIM_H */
