/*
 * A stand-in for NVIDIA's CUDA driver library (libcuda.so.1), for gpusplit's tests only:
 * the tests compile it with the system's C compiler and run gpusplit-cuda against it. It
 * never ships, and gpusplit itself stays free of cgo.
 *
 * It exports the entry points gpusplit-cuda binds (internal/cuda.Symbols), with the
 * prototypes transcribed from NVIDIA's cuda.h of CUDA 12.6 (CUDA_VERSION 12060), the
 * versioned names (_v2) being the ones that header's #defines map the plain names to. The
 * result codes are that header's CUresult values.
 *
 * What it models:
 *   - GPUs whose memory is host memory (device pointers are host addresses; the device
 *     address of mapped pinned memory is not the host's, as cuda.h allows);
 *   - a virtual clock for the host and one for each stream: every call costs the host
 *     call_us (spun in real time too, so that the host's own clock sees it), a queued
 *     operation starts when the stream is free and the host has queued it, a copy takes
 *     latency + bytes / bandwidth for its path (within a GPU, between GPUs with or without
 *     peer access, to or from the host), events take the stream's time, rounded down to
 *     the resolution that cuEventElapsedTime documents (about 0.5 us);
 *   - cuStreamWaitValue32 on a host word: work behind it waits until the host writes the
 *     word, which the stand-in sees at the host's next call;
 *   - validation of every call: initialised, a context current on the calling thread,
 *     handles alive, pointers inside allocations of the right device and kind, pinned
 *     memory for asynchronous copies, nothing freed or copied over while queued work still
 *     uses it, no wait that could never end. A violation returns an error and is recorded;
 *   - injection: pairs without peer access, copies of a pair and path that corrupt, the
 *     n-th call of a function failing without effect;
 *   - counters of what is alive (allocations, retained contexts, streams, events, peer
 *     mappings) and of calls, rewritten after every call into the report file, since
 *     gpusplit leaves by exit_group, which runs no destructor.
 *
 * Configuration, from the environment when the library is loaded:
 *   CUDASTUB_GPUS     number of GPUs (default 2; 0: cuInit says CUDA_ERROR_NO_DEVICE)
 *   CUDASTUB_MODEL    key=value,...: peer_gbps staged_gbps local_gbps host_gbps (GB/s, 10^9
 *                     bytes), peer_us staged_us local_us host_us (a copy's latency),
 *                     call_us (the host's cost of every call), resolution_us
 *   CUDASTUB_NOPEER   src>dst,...: pairs that cuDeviceCanAccessPeer refuses
 *   CUDASTUB_CORRUPT  src>dst:path,...: copies that arrive with every 4096th byte from
 *                     offset 7 flipped; path is peer, staged or local
 *   CUDASTUB_FAIL     name:n[:code],...: the n-th call of a function fails (default code
 *                     CUDA_ERROR_OUT_OF_MEMORY)
 *   CUDASTUB_QUEUE    operations a stream holds before a call that queues one more
 *                     blocks until it has room, as the driver's does when its queue is
 *                     full (default: no limit); after 30 s it gives up, a violation
 *   CUDASTUB_REPORT   the report file: "call NAME N", "live KIND N", "violation TEXT"
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Types, as cuda.h (CUDA 12.6) declares them. */
typedef enum cudaError_enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_ILLEGAL_STATE = 401,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
	CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
	CUDA_ERROR_LAUNCH_FAILED = 719,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_UNKNOWN = 999
} CUresult;
typedef uint32_t cuuint32_t;
typedef unsigned long long CUdeviceptr;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED 0x04
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_STREAM_WAIT_VALUE_GEQ 0x0
#define CU_STREAM_WAIT_VALUE_EQ 0x1
#define CU_STREAM_WAIT_VALUE_AND 0x2
#define CU_STREAM_WAIT_VALUE_NOR 0x3
#define CU_STREAM_WAIT_VALUE_FLUSH (1 << 30)
#define CU_DEVICE_ATTRIBUTE_PCI_BUS_ID 33
#define CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID 34
#define CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID 50
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

#define EXPORT __attribute__((visibility("default")))
#define MAXDEV 16
/* Device addresses of mapped pinned memory: above any user-space address on x86-64 and
 * arm64, so that a host pointer passed where the device address belongs is caught. */
#define MAPPED_OFFSET (1ULL << 56)

/* The functions, for call counts and injected failures. */
#define FUNCTIONS(X) \
	X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) \
	X(cuDeviceTotalMem_v2) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2) \
	X(cuCtxSetCurrent) X(cuDeviceCanAccessPeer) X(cuCtxEnablePeerAccess) X(cuCtxDisablePeerAccess) \
	X(cuMemAlloc_v2) X(cuMemFree_v2) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostGetDevicePointer_v2) \
	X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyPeer) X(cuMemcpyPeerAsync) X(cuMemcpyHtoDAsync_v2) \
	X(cuMemcpyDtoHAsync_v2) X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamWaitEvent) \
	X(cuStreamWaitValue32_v2) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventRecord) \
	X(cuEventElapsedTime) X(cuEventDestroy_v2) X(cuGetErrorName) X(cuGetErrorString)
#define ENUM(f) FN_##f,
#define NAME(f) #f,
enum { FUNCTIONS(ENUM) NFN };
static const char *fn_name[] = {FUNCTIONS(NAME)};

/* Configuration. */
static int ndev = 2;
static char dev_name[64] = "NVIDIA H200";
static struct {
	double peer_gbps, staged_gbps, local_gbps, host_gbps;
	double peer_us, staged_us, local_us, host_us, call_us, resolution_us;
} model = {50, 20, 1000, 25, 2, 10, 1, 3, 0, 0.5};
static int nopeer[MAXDEV][MAXDEV];
enum { PATH_LOCAL, PATH_PEER, PATH_STAGED, PATH_HOST, NPATH };
static const char *path_name[] = {"local", "peer", "staged", "host"};
static int corrupt[MAXDEV][MAXDEV][NPATH];
#define MAXFAIL 16
static struct {
	int fn, n;
	CUresult code;
} fails[MAXFAIL];
static int nfails;
static int report_fd = -1;
static int queue_depth; /* 0: no limit */

/* State. */
static int initialised;
static long calls[NFN];
static double host_now; /* the host's virtual clock, ns */

struct CUctx_st {
	int dev, refs;
	int peer[MAXDEV]; /* access from this context to the device's context enabled */
};
static struct CUctx_st ctxs[MAXDEV];
static __thread struct CUctx_st *current;
static int peer_mappings;

struct alloc {
	char *base;
	size_t size;
	int host;                /* pinned host memory (cuMemHostAlloc), else device memory */
	int dev;                 /* device memory: its device */
	unsigned flags, mapped;  /* host memory: its flags, the contexts that asked for its device address */
	int alive, queued;       /* queued operations that use it and have not run */
	double busy_until;       /* the end of the last operation that ran on it */
};
#define MAXALLOC 4096
static struct alloc allocs[MAXALLOC];
static int nallocs;

enum { OP_COPY, OP_RECORD, OP_WAIT_EVENT, OP_WAIT_VALUE };
struct op {
	int kind;
	double enqueued;
	char *dst, *src;
	size_t n;
	int path, src_dev, dst_dev;
	struct alloc *a_dst, *a_src;
	struct CUevent_st *event;
	unsigned seq;
	volatile uint32_t *word;
	uint32_t value;
	unsigned flags;
	struct op *next;
};
struct CUstream_st {
	struct CUctx_st *ctx;
	int alive, queued;
	double clock; /* when its last operation ended */
	struct op *head, *tail;
};
struct CUevent_st {
	struct CUctx_st *ctx;
	int alive;
	unsigned flags, recorded, done;
	double time;
};
#define MAXHANDLE 65536
static struct CUstream_st *streams[MAXHANDLE];
static int nstreams;
static struct CUevent_st *events[MAXHANDLE];
static int nevents;

#define MAXVIOLATION 64
static char violations[MAXVIOLATION][256];
static int nviolations;
static int fn_now = -1; /* the function being called, for messages */

static CUresult violation(CUresult code, const char *format, ...) __attribute__((format(printf, 2, 3)));
static CUresult violation(CUresult code, const char *format, ...) {
	char msg[200];
	va_list ap;
	va_start(ap, format);
	vsnprintf(msg, sizeof msg, format, ap);
	va_end(ap);
	if (nviolations < MAXVIOLATION) {
		snprintf(violations[nviolations++], sizeof violations[0], "%s: %s", fn_now >= 0 ? fn_name[fn_now] : "?", msg);
	}
	fprintf(stderr, "cudastub: violation: %s: %s\n", fn_now >= 0 ? fn_name[fn_now] : "?", msg);
	return code;
}

static void write_report(void) {
	static char buf[1 << 16];
	if (report_fd < 0) {
		return;
	}
	int n = 0, host = 0, dev = 0, refs = 0, live_streams = 0, live_events = 0;
	for (int i = 0; i < nallocs; i++) {
		if (allocs[i].alive) {
			allocs[i].host ? host++ : dev++;
		}
	}
	for (int i = 0; i < ndev; i++) {
		refs += ctxs[i].refs;
	}
	for (int i = 0; i < nstreams; i++) {
		live_streams += streams[i]->alive;
	}
	for (int i = 0; i < nevents; i++) {
		live_events += events[i]->alive;
	}
	for (int i = 0; i < NFN; i++) {
		n += snprintf(buf + n, sizeof buf - n, "call %s %ld\n", fn_name[i], calls[i]);
	}
	n += snprintf(buf + n, sizeof buf - n,
		"live device_allocations %d\nlive host_allocations %d\nlive context_references %d\n"
		"live streams %d\nlive events %d\nlive peer_mappings %d\n",
		dev, host, refs, live_streams, live_events, peer_mappings);
	for (int i = 0; i < nviolations; i++) {
		n += snprintf(buf + n, sizeof buf - n, "violation %s\n", violations[i]);
	}
	if (pwrite(report_fd, buf, n, 0) != n || ftruncate(report_fd, n) != 0) {
		fprintf(stderr, "cudastub: writing the report failed\n");
	}
}

static double now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double max2(double a, double b) { return a > b ? a : b; }

/* Configuration from the environment. */
static int fn_index(const char *name, size_t len) {
	for (int i = 0; i < NFN; i++) {
		if (strlen(fn_name[i]) == len && strncmp(fn_name[i], name, len) == 0) {
			return i;
		}
	}
	return -1;
}

static void config_error(const char *var, const char *item) {
	fprintf(stderr, "cudastub: %s: cannot read %s\n", var, item);
	exit(70);
}

static void configure(void) {
	const char *v;
	if ((v = getenv("CUDASTUB_GPUS")) != NULL) {
		ndev = atoi(v);
		if (ndev < 0 || ndev > MAXDEV) {
			config_error("CUDASTUB_GPUS", v);
		}
	}
	if ((v = getenv("CUDASTUB_NAME")) != NULL) {
		snprintf(dev_name, sizeof dev_name, "%s", v);
	}
	char buf[1024];
	if ((v = getenv("CUDASTUB_MODEL")) != NULL) {
		snprintf(buf, sizeof buf, "%s", v);
		for (char *save, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
			char key[32];
			double val;
			if (sscanf(item, "%31[a-z_]=%lf", key, &val) != 2 || val < 0) {
				config_error("CUDASTUB_MODEL", item);
			}
			struct {
				const char *key;
				double *val;
			} keys[] = {{"peer_gbps", &model.peer_gbps}, {"staged_gbps", &model.staged_gbps},
				{"local_gbps", &model.local_gbps}, {"host_gbps", &model.host_gbps}, {"peer_us", &model.peer_us},
				{"staged_us", &model.staged_us}, {"local_us", &model.local_us}, {"host_us", &model.host_us},
				{"call_us", &model.call_us}, {"resolution_us", &model.resolution_us}};
			size_t k = 0;
			while (k < sizeof keys / sizeof keys[0] && strcmp(keys[k].key, key) != 0) {
				k++;
			}
			if (k == sizeof keys / sizeof keys[0]) {
				config_error("CUDASTUB_MODEL", item);
			}
			*keys[k].val = val;
		}
	}
	if ((v = getenv("CUDASTUB_NOPEER")) != NULL) {
		snprintf(buf, sizeof buf, "%s", v);
		for (char *save, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
			int a, b;
			if (sscanf(item, "%d>%d", &a, &b) != 2 || a < 0 || b < 0 || a >= MAXDEV || b >= MAXDEV) {
				config_error("CUDASTUB_NOPEER", item);
			}
			nopeer[a][b] = 1;
		}
	}
	if ((v = getenv("CUDASTUB_CORRUPT")) != NULL) {
		snprintf(buf, sizeof buf, "%s", v);
		for (char *save, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
			int a, b, p = 0;
			char path[16];
			if (sscanf(item, "%d>%d:%15s", &a, &b, path) != 3 || a < 0 || b < 0 || a >= MAXDEV || b >= MAXDEV) {
				config_error("CUDASTUB_CORRUPT", item);
			}
			while (p < NPATH && strcmp(path_name[p], path) != 0) {
				p++;
			}
			if (p == NPATH) {
				config_error("CUDASTUB_CORRUPT", item);
			}
			corrupt[a][b][p] = 1;
		}
	}
	if ((v = getenv("CUDASTUB_FAIL")) != NULL) {
		snprintf(buf, sizeof buf, "%s", v);
		for (char *save, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
			char *colon = strchr(item, ':');
			int code = CUDA_ERROR_OUT_OF_MEMORY, n, fn = colon ? fn_index(item, colon - item) : -1;
			if (fn < 0 || nfails == MAXFAIL || sscanf(colon + 1, "%d:%d", &n, &code) < 1 || n < 1) {
				config_error("CUDASTUB_FAIL", item);
			}
			fails[nfails].fn = fn;
			fails[nfails].n = n;
			fails[nfails++].code = code;
		}
	}
	if ((v = getenv("CUDASTUB_QUEUE")) != NULL) {
		queue_depth = atoi(v);
		if (queue_depth < 0) {
			config_error("CUDASTUB_QUEUE", v);
		}
	}
	if ((v = getenv("CUDASTUB_REPORT")) != NULL) {
		report_fd = open(v, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (report_fd < 0) {
			config_error("CUDASTUB_REPORT", v);
		}
	}
	for (int i = 0; i < MAXDEV; i++) {
		ctxs[i].dev = i;
	}
	write_report();
}

__attribute__((constructor)) static void load(void) { configure(); }

/* Streams run what they can: an operation starts when its stream is free and the host
 * has queued it, and waits hold it until their condition holds. Called at every call's
 * start, since a host word a stream waits on is written between calls, and at its end. */
static int satisfied(struct op *o) {
	uint32_t w = *o->word;
	switch (o->flags) {
	case CU_STREAM_WAIT_VALUE_GEQ:
		return (int32_t)(w - o->value) >= 0;
	case CU_STREAM_WAIT_VALUE_EQ:
		return w == o->value;
	case CU_STREAM_WAIT_VALUE_AND:
		return (w & o->value) != 0;
	default:
		return ~(w | o->value) != 0;
	}
}

static void run_copy(struct op *o) {
	memmove(o->dst, o->src, o->n);
	if (o->path != PATH_HOST && corrupt[o->src_dev][o->dst_dev][o->path]) {
		for (size_t off = 7; off < o->n; off += 4096) {
			o->dst[off] ^= 0xff;
		}
	}
}

static double copy_ns(int path, size_t n) {
	double gbps[] = {model.local_gbps, model.peer_gbps, model.staged_gbps, model.host_gbps};
	double us[] = {model.local_us, model.peer_us, model.staged_us, model.host_us};
	return us[path] * 1e3 + n / gbps[path]; /* GB/s is bytes per ns */
}

static void advance(void) {
	int progress;
	do {
		progress = 0;
		for (int i = 0; i < nstreams; i++) {
			struct CUstream_st *s = streams[i];
			struct op *o;
			while ((o = s->head) != NULL) {
				double t = max2(s->clock, o->enqueued);
				if (o->kind == OP_WAIT_VALUE) {
					if (!satisfied(o)) {
						break;
					}
					t = max2(t, host_now); /* seen now: written since the last call */
				} else if (o->kind == OP_WAIT_EVENT) {
					if (o->event->done < o->seq) {
						break;
					}
					t = max2(t, o->event->time);
				} else if (o->kind == OP_RECORD) {
					o->event->time = t;
					if (o->event->done < o->seq) {
						o->event->done = o->seq;
					}
				} else {
					run_copy(o);
					t += copy_ns(o->path, o->n);
					o->a_dst->queued--;
					o->a_src->queued--;
					o->a_dst->busy_until = max2(o->a_dst->busy_until, t);
					o->a_src->busy_until = max2(o->a_src->busy_until, t);
				}
				s->clock = t;
				s->queued--;
				s->head = o->next;
				if (s->head == NULL) {
					s->tail = NULL;
				}
				free(o);
				progress = 1;
			}
		}
	} while (progress);
}

/* room blocks, as the driver does, while the stream's queue is full: only the host
 * writing a word that the stream waits on, from another thread, can make room then. */
static CUresult room(struct CUstream_st *s) {
	double since = now_ns();
	while (queue_depth > 0 && s->queued >= queue_depth) {
		if (now_ns() - since > 30e9) {
			return violation(CUDA_ERROR_ILLEGAL_STATE, "blocked for ever: the stream's queue is full and what is queued waits");
		}
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
		advance();
	}
	return CUDA_SUCCESS;
}

static void enqueue(struct CUstream_st *s, struct op *o) {
	s->queued++;
	o->enqueued = host_now;
	o->next = NULL;
	if (s->tail) {
		s->tail->next = o;
	} else {
		s->head = o;
	}
	s->tail = o;
}

/* Every call starts with begin and returns through end. */
static CUresult begin(int fn) {
	fn_now = fn;
	calls[fn]++;
	advance();
	double spin = model.call_us * 1e3, t0 = now_ns();
	host_now += spin;
	while (spin > 0 && now_ns() - t0 < spin) {
	}
	for (int i = 0; i < nfails; i++) {
		if (fails[i].fn == fn && fails[i].n == calls[fn]) {
			return fails[i].code;
		}
	}
	return CUDA_SUCCESS;
}

static CUresult end(CUresult r) {
	advance();
	write_report();
	fn_now = -1;
	return r;
}

#define BEGIN(f)                             \
	CUresult r_ = begin(FN_##f);         \
	if (r_ != CUDA_SUCCESS) {            \
		return end(r_);              \
	}
#define FAIL(...) return end(violation(__VA_ARGS__))
#define NEED_INIT() \
	if (!initialised) FAIL(CUDA_ERROR_NOT_INITIALIZED, "called before cuInit")
#define NEED_CTX()                                                                              \
	NEED_INIT();                                                                            \
	if (current == NULL) FAIL(CUDA_ERROR_INVALID_CONTEXT, "no context is current on this thread"); \
	if (current->refs == 0) FAIL(CUDA_ERROR_INVALID_CONTEXT, "the current context was released")
#define NEED_PTR(p) \
	if ((p) == NULL) FAIL(CUDA_ERROR_INVALID_VALUE, "%s is NULL", #p)

static int valid_dev(CUdevice d) { return d >= 0 && d < ndev; }

static struct CUctx_st *context(CUcontext c) {
	for (int i = 0; i < ndev; i++) {
		if (c == &ctxs[i] && ctxs[i].refs > 0) {
			return &ctxs[i];
		}
	}
	return NULL;
}

static struct CUstream_st *live_stream(CUstream h) {
	for (int i = 0; i < nstreams; i++) {
		if (streams[i] == h && streams[i]->alive) {
			return streams[i];
		}
	}
	return NULL;
}

static struct CUevent_st *live_event(CUevent h) {
	for (int i = 0; i < nevents; i++) {
		if (events[i] == h && events[i]->alive) {
			return events[i];
		}
	}
	return NULL;
}

/* find returns the live allocation holding [p, p+n), of device memory of device dev
 * (any with -1), or of pinned host memory with dev == -2; mapped pinned memory by its
 * device address with dev == -3. */
static struct alloc *find(uintptr_t p, size_t n, int dev) {
	for (int i = 0; i < nallocs; i++) {
		struct alloc *a = &allocs[i];
		uintptr_t base = (uintptr_t)a->base;
		if (!a->alive) {
			continue;
		}
		if (dev == -3) {
			if (!a->host || !(a->flags & CU_MEMHOSTALLOC_DEVICEMAP)) {
				continue;
			}
			base += MAPPED_OFFSET;
		} else if (dev == -2 ? !a->host : (a->host || (dev >= 0 && a->dev != dev))) {
			continue;
		}
		if (p >= base && n <= a->size && p - base <= a->size - n) {
			return a;
		}
	}
	return NULL;
}

/* busy says why an allocation may not be freed or overwritten now: queued work that has
 * not run, or work that runs until after the host's present. */
static const char *busy(struct alloc *a) {
	if (a->queued > 0) {
		return "queued work that has not run yet uses it";
	}
	if (a->busy_until > host_now) {
		return "a copy still running on the GPU uses it";
	}
	return NULL;
}

static int path_of(int src, int dst) {
	if (src == dst) {
		return PATH_LOCAL;
	}
	return ctxs[src].peer[dst] || ctxs[dst].peer[src] ? PATH_PEER : PATH_STAGED;
}

/* Initialisation, devices. */

EXPORT CUresult cuInit(unsigned int Flags) {
	BEGIN(cuInit);
	if (Flags != 0) FAIL(CUDA_ERROR_INVALID_VALUE, "Flags must be 0");
	if (ndev == 0) {
		return end(CUDA_ERROR_NO_DEVICE);
	}
	initialised = 1;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetCount(int *count) {
	BEGIN(cuDeviceGetCount);
	NEED_INIT();
	NEED_PTR(count);
	*count = ndev;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
	BEGIN(cuDeviceGet);
	NEED_INIT();
	NEED_PTR(device);
	if (!valid_dev(ordinal)) FAIL(CUDA_ERROR_INVALID_DEVICE, "no device %d", ordinal);
	*device = ordinal;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
	BEGIN(cuDeviceGetName);
	NEED_INIT();
	NEED_PTR(name);
	if (!valid_dev(dev)) FAIL(CUDA_ERROR_INVALID_DEVICE, "no device %d", dev);
	if (len <= 0) FAIL(CUDA_ERROR_INVALID_VALUE, "len %d", len);
	snprintf(name, len, "%s", dev_name);
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
	BEGIN(cuDeviceGetAttribute);
	NEED_INIT();
	NEED_PTR(pi);
	if (!valid_dev(dev)) FAIL(CUDA_ERROR_INVALID_DEVICE, "no device %d", dev);
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		*pi = 0x10 * (dev + 1); /* 0000:10:00.0, 0000:20:00.0, ... */
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
		*pi = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*pi = 9;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*pi = 0;
		break;
	default:
		FAIL(CUDA_ERROR_INVALID_VALUE, "attribute %d is not modelled", attrib);
	}
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
	BEGIN(cuDeviceTotalMem_v2);
	NEED_INIT();
	NEED_PTR(bytes);
	if (!valid_dev(dev)) FAIL(CUDA_ERROR_INVALID_DEVICE, "no device %d", dev);
	*bytes = (size_t)141 << 30;
	return end(CUDA_SUCCESS);
}

/* Contexts. */

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
	BEGIN(cuDevicePrimaryCtxRetain);
	NEED_INIT();
	NEED_PTR(pctx);
	if (!valid_dev(dev)) FAIL(CUDA_ERROR_INVALID_DEVICE, "no device %d", dev);
	ctxs[dev].refs++;
	*pctx = &ctxs[dev];
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
	BEGIN(cuDevicePrimaryCtxRelease_v2);
	NEED_INIT();
	if (!valid_dev(dev)) FAIL(CUDA_ERROR_INVALID_DEVICE, "no device %d", dev);
	if (ctxs[dev].refs == 0) FAIL(CUDA_ERROR_INVALID_CONTEXT, "device %d's primary context is not retained", dev);
	if (--ctxs[dev].refs == 0 && current == &ctxs[dev]) {
		current = NULL;
	}
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
	BEGIN(cuCtxSetCurrent);
	NEED_INIT();
	if (ctx != NULL && context(ctx) == NULL) FAIL(CUDA_ERROR_INVALID_CONTEXT, "%p is not a retained context", (void *)ctx);
	current = ctx;
	return end(CUDA_SUCCESS);
}

/* Peer access. */

EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
	BEGIN(cuDeviceCanAccessPeer);
	NEED_INIT();
	NEED_PTR(canAccessPeer);
	if (!valid_dev(dev) || !valid_dev(peerDev)) FAIL(CUDA_ERROR_INVALID_DEVICE, "no device %d or %d", dev, peerDev);
	*canAccessPeer = dev != peerDev && !nopeer[dev][peerDev];
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
	BEGIN(cuCtxEnablePeerAccess);
	NEED_CTX();
	struct CUctx_st *peer = context(peerContext);
	if (peer == NULL || peer == current) FAIL(CUDA_ERROR_INVALID_CONTEXT, "%p is not another retained context", (void *)peerContext);
	if (Flags != 0) FAIL(CUDA_ERROR_INVALID_VALUE, "Flags must be 0");
	if (nopeer[current->dev][peer->dev]) {
		return end(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	}
	if (current->peer[peer->dev]) {
		return end(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	}
	current->peer[peer->dev] = 1;
	peer_mappings++;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peerContext) {
	BEGIN(cuCtxDisablePeerAccess);
	NEED_CTX();
	struct CUctx_st *peer = context(peerContext);
	if (peer == NULL) FAIL(CUDA_ERROR_INVALID_CONTEXT, "%p is not a retained context", (void *)peerContext);
	if (!current->peer[peer->dev]) {
		return end(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	}
	current->peer[peer->dev] = 0;
	peer_mappings--;
	return end(CUDA_SUCCESS);
}

/* Memory. */

static struct alloc *new_alloc(size_t size) {
	char *p;
	if (nallocs == MAXALLOC || posix_memalign((void **)&p, 4096, size) != 0) {
		return NULL;
	}
	struct alloc *a = &allocs[nallocs++];
	memset(a, 0, sizeof *a);
	a->base = p;
	a->size = size;
	a->alive = 1;
	return a;
}

static CUresult free_alloc(struct alloc *a) {
	const char *why = busy(a);
	if (why) {
		return violation(CUDA_ERROR_ILLEGAL_STATE, "%p is freed while %s", (void *)a->base, why);
	}
	free(a->base);
	a->alive = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
	BEGIN(cuMemAlloc_v2);
	NEED_CTX();
	NEED_PTR(dptr);
	if (bytesize == 0) FAIL(CUDA_ERROR_INVALID_VALUE, "bytesize is 0");
	struct alloc *a = new_alloc(bytesize);
	if (a == NULL) {
		return end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	a->dev = current->dev;
	*dptr = (CUdeviceptr)(uintptr_t)a->base;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
	BEGIN(cuMemFree_v2);
	NEED_CTX();
	struct alloc *a = find(dptr, 1, -1);
	if (a == NULL || (uintptr_t)a->base != dptr) FAIL(CUDA_ERROR_INVALID_VALUE, "%#llx is not device memory's start", dptr);
	return end(free_alloc(a));
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
	BEGIN(cuMemHostAlloc);
	NEED_CTX();
	NEED_PTR(pp);
	if (bytesize == 0) FAIL(CUDA_ERROR_INVALID_VALUE, "bytesize is 0");
	if (Flags & ~(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)) FAIL(CUDA_ERROR_INVALID_VALUE, "Flags %#x", Flags);
	struct alloc *a = new_alloc(bytesize);
	if (a == NULL) {
		return end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	a->host = 1;
	a->dev = -1;
	a->flags = Flags;
	*pp = a->base;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuMemFreeHost(void *p) {
	BEGIN(cuMemFreeHost);
	NEED_CTX();
	struct alloc *a = find((uintptr_t)p, 1, -2);
	if (a == NULL || a->base != p) FAIL(CUDA_ERROR_INVALID_VALUE, "%p is not pinned memory's start", p);
	return end(free_alloc(a));
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags) {
	BEGIN(cuMemHostGetDevicePointer_v2);
	NEED_CTX();
	NEED_PTR(pdptr);
	if (Flags != 0) FAIL(CUDA_ERROR_INVALID_VALUE, "Flags must be 0");
	struct alloc *a = find((uintptr_t)p, 1, -2);
	if (a == NULL) FAIL(CUDA_ERROR_INVALID_VALUE, "%p is not pinned memory", p);
	if (!(a->flags & CU_MEMHOSTALLOC_DEVICEMAP)) FAIL(CUDA_ERROR_INVALID_VALUE, "%p was allocated without CU_MEMHOSTALLOC_DEVICEMAP", p);
	if (!(a->flags & CU_MEMHOSTALLOC_PORTABLE) && a->mapped != 0 && !(a->mapped & (1u << current->dev))) FAIL(CUDA_ERROR_INVALID_VALUE, "%p is not portable: mapped for one context only", p);
	a->mapped |= 1u << current->dev;
	*pdptr = (CUdeviceptr)(uintptr_t)p + MAPPED_OFFSET;
	return end(CUDA_SUCCESS);
}

/* Copies. A synchronous copy runs on the host's clock; it may not touch memory that
 * queued work still uses, since nothing orders the two. */

static CUresult device_range(CUdeviceptr p, size_t n, int dev, const char *what, struct alloc **out) {
	struct alloc *a = find(p, n, dev);
	if (a == NULL) {
		struct alloc *any = find(p, n, -1);
		if (any) {
			return violation(CUDA_ERROR_INVALID_VALUE, "%s %#llx is on device %d, not %d", what, p, any->dev, dev);
		}
		return violation(CUDA_ERROR_INVALID_VALUE, "%s [%#llx, +%zu) is not inside device memory", what, p, n);
	}
	*out = a;
	return CUDA_SUCCESS;
}

static CUresult host_range(const void *p, size_t n, const char *what, struct alloc **out) {
	struct alloc *a = find((uintptr_t)p, n, -2);
	if (a == NULL) {
		return violation(CUDA_ERROR_INVALID_VALUE, "%s %p +%zu is not inside pinned memory: the driver would copy pageable memory synchronously", what, p, n);
	}
	*out = a;
	return CUDA_SUCCESS;
}

static CUresult sync_copy(char *dst, const char *src, size_t n, int path, int sd, int dd, struct alloc *a, struct alloc *b) {
	struct alloc *both[] = {a, b};
	for (int i = 0; i < 2; i++) {
		const char *why = both[i] ? busy(both[i]) : NULL;
		if (why) {
			return violation(CUDA_ERROR_ILLEGAL_STATE, "copies over %p while %s", (void *)both[i]->base, why);
		}
	}
	struct op o = {.dst = dst, .src = (char *)src, .n = n, .path = path, .src_dev = sd, .dst_dev = dd};
	run_copy(&o);
	host_now += copy_ns(path, n);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
	BEGIN(cuMemcpyHtoD_v2);
	NEED_CTX();
	NEED_PTR(srcHost);
	struct alloc *a = NULL;
	CUresult r = device_range(dstDevice, ByteCount, current->dev, "dstDevice", &a);
	if (r == CUDA_SUCCESS) {
		r = sync_copy((char *)(uintptr_t)dstDevice, srcHost, ByteCount, PATH_HOST, -1, current->dev, a, NULL);
	}
	return end(r);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
	BEGIN(cuMemcpyDtoH_v2);
	NEED_CTX();
	NEED_PTR(dstHost);
	struct alloc *a = NULL;
	CUresult r = device_range(srcDevice, ByteCount, current->dev, "srcDevice", &a);
	if (r == CUDA_SUCCESS) {
		r = sync_copy(dstHost, (char *)(uintptr_t)srcDevice, ByteCount, PATH_HOST, current->dev, -1, a, NULL);
	}
	return end(r);
}

static CUresult peer_args(CUdeviceptr dst, CUcontext dstContext, CUdeviceptr src, CUcontext srcContext, size_t n,
	struct alloc **ad, struct alloc **as, int *dd, int *sd) {
	struct CUctx_st *dc = context(dstContext), *sc = context(srcContext);
	if (dc == NULL || sc == NULL) {
		return violation(CUDA_ERROR_INVALID_CONTEXT, "dstContext %p or srcContext %p is not a retained context", (void *)dstContext, (void *)srcContext);
	}
	CUresult r = device_range(dst, n, dc->dev, "dstDevice", ad);
	if (r == CUDA_SUCCESS) {
		r = device_range(src, n, sc->dev, "srcDevice", as);
	}
	*dd = dc->dev;
	*sd = sc->dev;
	return r;
}

EXPORT CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount) {
	BEGIN(cuMemcpyPeer);
	NEED_CTX();
	struct alloc *ad = NULL, *as = NULL;
	int dd, sd;
	CUresult r = peer_args(dstDevice, dstContext, srcDevice, srcContext, ByteCount, &ad, &as, &dd, &sd);
	if (r == CUDA_SUCCESS) {
		r = sync_copy((char *)(uintptr_t)dstDevice, (char *)(uintptr_t)srcDevice, ByteCount, path_of(sd, dd), sd, dd, ad, as);
	}
	return end(r);
}

/* An asynchronous copy runs on its stream's device, so one of its ends is there. */
static CUresult queue_copy(struct CUstream_st *s, char *dst, char *src, size_t n, int path, int sd, int dd, struct alloc *ad, struct alloc *as) {
	CUresult r = room(s);
	if (r != CUDA_SUCCESS) {
		return r;
	}
	struct op *o = calloc(1, sizeof *o);
	if (o == NULL) {
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*o = (struct op){.kind = OP_COPY, .dst = dst, .src = src, .n = n, .path = path, .src_dev = sd, .dst_dev = dd, .a_dst = ad, .a_src = as};
	ad->queued++;
	as->queued++;
	enqueue(s, o);
	return CUDA_SUCCESS;
}

#define NEED_STREAM(h, s)                                                              \
	struct CUstream_st *s = live_stream(h);                                              \
	if (h == NULL) FAIL(CUDA_ERROR_INVALID_HANDLE, "the NULL stream is not modelled"); \
	if (s == NULL) FAIL(CUDA_ERROR_INVALID_HANDLE, "%p is not a live stream", (void *)h)

EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream) {
	BEGIN(cuMemcpyPeerAsync);
	NEED_CTX();
	NEED_STREAM(hStream, s);
	struct alloc *ad = NULL, *as = NULL;
	int dd, sd;
	CUresult r = peer_args(dstDevice, dstContext, srcDevice, srcContext, ByteCount, &ad, &as, &dd, &sd);
	if (r != CUDA_SUCCESS) {
		return end(r);
	}
	if (s->ctx->dev != sd && s->ctx->dev != dd) FAIL(CUDA_ERROR_INVALID_HANDLE, "the stream is on device %d, the copy from %d to %d", s->ctx->dev, sd, dd);
	return end(queue_copy(s, (char *)(uintptr_t)dstDevice, (char *)(uintptr_t)srcDevice, ByteCount, path_of(sd, dd), sd, dd, ad, as));
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream) {
	BEGIN(cuMemcpyHtoDAsync_v2);
	NEED_CTX();
	NEED_STREAM(hStream, s);
	struct alloc *ad = NULL, *as = NULL;
	CUresult r = device_range(dstDevice, ByteCount, s->ctx->dev, "dstDevice", &ad);
	if (r == CUDA_SUCCESS) {
		r = host_range(srcHost, ByteCount, "srcHost", &as);
	}
	if (r == CUDA_SUCCESS) {
		r = queue_copy(s, (char *)(uintptr_t)dstDevice, (char *)srcHost, ByteCount, PATH_HOST, -1, s->ctx->dev, ad, as);
	}
	return end(r);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
	BEGIN(cuMemcpyDtoHAsync_v2);
	NEED_CTX();
	NEED_STREAM(hStream, s);
	struct alloc *ad = NULL, *as = NULL;
	CUresult r = device_range(srcDevice, ByteCount, s->ctx->dev, "srcDevice", &as);
	if (r == CUDA_SUCCESS) {
		r = host_range(dstHost, ByteCount, "dstHost", &ad);
	}
	if (r == CUDA_SUCCESS) {
		r = queue_copy(s, dstHost, (char *)(uintptr_t)srcDevice, ByteCount, PATH_HOST, s->ctx->dev, -1, ad, as);
	}
	return end(r);
}

/* Streams. */

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
	BEGIN(cuStreamCreate);
	NEED_CTX();
	NEED_PTR(phStream);
	if (Flags & ~CU_STREAM_NON_BLOCKING) FAIL(CUDA_ERROR_INVALID_VALUE, "Flags %#x", Flags);
	struct CUstream_st *s = calloc(1, sizeof *s);
	if (s == NULL || nstreams == MAXHANDLE) {
		free(s);
		return end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	s->ctx = current;
	s->alive = 1;
	s->clock = host_now;
	streams[nstreams++] = s;
	*phStream = s;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
	BEGIN(cuStreamDestroy_v2);
	NEED_CTX();
	NEED_STREAM(hStream, s);
	/* The driver lets queued work finish after the stream is destroyed: work that waits
	 * for a word nobody writes any more never does. */
	if (s->head) FAIL(CUDA_ERROR_ILLEGAL_STATE, "destroyed with work queued that can never run");
	s->alive = 0;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
	BEGIN(cuStreamWaitEvent);
	NEED_CTX();
	NEED_STREAM(hStream, s);
	struct CUevent_st *e = live_event(hEvent);
	if (e == NULL) FAIL(CUDA_ERROR_INVALID_HANDLE, "%p is not a live event", (void *)hEvent);
	if (Flags != 0) FAIL(CUDA_ERROR_INVALID_VALUE, "Flags %#x", Flags);
	if (e->recorded == 0) {
		return end(CUDA_SUCCESS); /* waiting for an event never recorded waits for nothing */
	}
	CUresult full = room(s);
	if (full != CUDA_SUCCESS) {
		return end(full);
	}
	struct op *o = calloc(1, sizeof *o);
	if (o == NULL) {
		return end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	*o = (struct op){.kind = OP_WAIT_EVENT, .event = e, .seq = e->recorded};
	enqueue(s, o);
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
	BEGIN(cuStreamWaitValue32_v2);
	NEED_CTX();
	NEED_STREAM(stream, s);
	if ((flags & ~CU_STREAM_WAIT_VALUE_FLUSH) > CU_STREAM_WAIT_VALUE_NOR) FAIL(CUDA_ERROR_INVALID_VALUE, "flags %#x", flags);
	if (flags & CU_STREAM_WAIT_VALUE_FLUSH) {
		return end(CUDA_ERROR_NOT_SUPPORTED);
	}
	if (addr % 4 != 0) FAIL(CUDA_ERROR_INVALID_VALUE, "addr %#llx is not 4-byte aligned", addr);
	volatile uint32_t *word;
	struct alloc *a = find(addr, 4, -3);
	if (a != NULL) {
		if (!(a->mapped & (1u << s->ctx->dev))) FAIL(CUDA_ERROR_INVALID_VALUE, "addr %#llx: device %d never asked for this address (cuMemHostGetDevicePointer)", addr, s->ctx->dev);
		word = (volatile uint32_t *)(uintptr_t)(addr - MAPPED_OFFSET);
	} else if ((a = find(addr, 4, s->ctx->dev)) != NULL) {
		word = (volatile uint32_t *)(uintptr_t)addr;
	} else if (find(addr, 4, -2) != NULL) {
		FAIL(CUDA_ERROR_INVALID_VALUE, "addr %#llx is a host address: the device's is cuMemHostGetDevicePointer's", addr);
	} else {
		FAIL(CUDA_ERROR_INVALID_VALUE, "addr %#llx is neither mapped pinned memory nor device %d's memory", addr, s->ctx->dev);
	}
	CUresult full = room(s);
	if (full != CUDA_SUCCESS) {
		return end(full);
	}
	struct op *o = calloc(1, sizeof *o);
	if (o == NULL) {
		return end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	*o = (struct op){.kind = OP_WAIT_VALUE, .word = word, .value = value, .flags = flags};
	enqueue(s, o);
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
	BEGIN(cuStreamSynchronize);
	NEED_CTX();
	NEED_STREAM(hStream, s);
	/* The host waits here, so it cannot release a wait: one still blocking would block
	 * for ever. */
	if (s->head) FAIL(CUDA_ERROR_ILLEGAL_STATE, "would wait for ever: the stream's queued work waits for a word or an event that nothing will deliver");
	host_now = max2(host_now, s->clock);
	return end(CUDA_SUCCESS);
}

/* Events. */

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
	BEGIN(cuEventCreate);
	NEED_CTX();
	NEED_PTR(phEvent);
	if (Flags & ~0x7u) FAIL(CUDA_ERROR_INVALID_VALUE, "Flags %#x", Flags);
	struct CUevent_st *e = calloc(1, sizeof *e);
	if (e == NULL || nevents == MAXHANDLE) {
		free(e);
		return end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	e->ctx = current;
	e->alive = 1;
	e->flags = Flags;
	events[nevents++] = e;
	*phEvent = e;
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
	BEGIN(cuEventRecord);
	NEED_CTX();
	NEED_STREAM(hStream, s);
	struct CUevent_st *e = live_event(hEvent);
	if (e == NULL) FAIL(CUDA_ERROR_INVALID_HANDLE, "%p is not a live event", (void *)hEvent);
	if (e->ctx != s->ctx) FAIL(CUDA_ERROR_INVALID_HANDLE, "the event is of device %d, the stream of device %d", e->ctx->dev, s->ctx->dev);
	CUresult full = room(s);
	if (full != CUDA_SUCCESS) {
		return end(full);
	}
	struct op *o = calloc(1, sizeof *o);
	if (o == NULL) {
		return end(CUDA_ERROR_OUT_OF_MEMORY);
	}
	*o = (struct op){.kind = OP_RECORD, .event = e, .seq = ++e->recorded};
	enqueue(s, o);
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
	BEGIN(cuEventElapsedTime);
	NEED_CTX();
	NEED_PTR(pMilliseconds);
	struct CUevent_st *a = live_event(hStart), *b = live_event(hEnd);
	if (a == NULL || b == NULL) FAIL(CUDA_ERROR_INVALID_HANDLE, "hStart %p or hEnd %p is not a live event", (void *)hStart, (void *)hEnd);
	if (a->recorded == 0 || b->recorded == 0) FAIL(CUDA_ERROR_INVALID_HANDLE, "an event was never recorded");
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) FAIL(CUDA_ERROR_INVALID_HANDLE, "an event does not time");
	if (a->done < a->recorded || b->done < b->recorded) FAIL(CUDA_ERROR_NOT_READY, "an event has not completed: synchronise first");
	double res = model.resolution_us * 1e3, ta = a->time, tb = b->time;
	if (res > 0) {
		ta = (long long)(ta / res) * res;
		tb = (long long)(tb / res) * res;
	}
	*pMilliseconds = (float)((tb - ta) / 1e6);
	return end(CUDA_SUCCESS);
}

EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
	BEGIN(cuEventDestroy_v2);
	NEED_CTX();
	struct CUevent_st *e = live_event(hEvent);
	if (e == NULL) FAIL(CUDA_ERROR_INVALID_HANDLE, "%p is not a live event", (void *)hEvent);
	e->alive = 0; /* a record still queued completes anyway, as the driver does */
	return end(CUDA_SUCCESS);
}

/* Errors: the stand-in's own words for the codes it returns. */

static const struct {
	CUresult code;
	const char *name, *text;
} errors[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "cuInit has not been called"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "the stand-in has no device (CUDASTUB_GPUS=0)"},
	{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
	{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted in this state"},
	{CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
	{CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
	{CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult lookup_error(CUresult error, const char **pStr, int text) {
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (errors[i].code == error) {
			*pStr = text ? errors[i].text : errors[i].name;
			return CUDA_SUCCESS;
		}
	}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
	BEGIN(cuGetErrorName);
	NEED_PTR(pStr);
	return end(lookup_error(error, pStr, 0));
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
	BEGIN(cuGetErrorString);
	NEED_PTR(pStr);
	return end(lookup_error(error, pStr, 1));
}
