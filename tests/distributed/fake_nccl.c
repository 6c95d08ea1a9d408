/* A stand-in for libnccl.so.2 with NCCL's C signatures, for testing workbench's ctypes layer
 * without a GPU. One rank only: the "device" pointers are host pointers and each collective
 * is a copy (what NCCL computes for a world of one). It records the last call so the test can
 * check the arguments that crossed the ctypes boundary, and returns NCCL's error codes for
 * bad arguments. The same library also stands in for the CUDA driver's stream calls
 * (libcuda's cuStream*): a collective leaves its stream busy for fake_busy_queries queries
 * (the async handles' is_completed), until cuStreamSynchronize (their wait). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { int nranks, rank; char id[128]; } fakeComm;
static fakeComm the_comm;

/* Last call, read by the test through ctypes. */
char fake_last_call[32];
size_t fake_last_count;
int fake_last_datatype, fake_last_op, fake_last_peer;
void *fake_last_stream;
int fake_group_depth;

static const size_t type_size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

/* The stream calls. */
static int the_stream;
int fake_busy_queries, fake_pending, fake_query_error;
int fake_stream_flags, fake_syncs, fake_queries, fake_streams_destroyed;

int cuStreamCreate(void **stream, unsigned int flags) {
    fake_stream_flags = (int)flags;
    *stream = &the_stream;
    return 0;
}
int cuStreamSynchronize(void *stream) {
    if (stream != &the_stream) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    fake_syncs++;
    fake_pending = 0;
    return 0;
}
int cuStreamQuery(void *stream) {
    if (stream != &the_stream) return 400;
    fake_queries++;
    if (fake_query_error) return fake_query_error;
    if (fake_pending > 0) {
        fake_pending--;
        return 600; /* CUDA_ERROR_NOT_READY */
    }
    return 0;
}
int cuStreamDestroy_v2(void *stream) {
    if (stream != &the_stream) return 400;
    fake_streams_destroyed++;
    return 0;
}

static int record(const char *name, size_t count, int datatype, int op, int peer, void *stream) {
    fake_pending = fake_busy_queries; /* queued on the stream: busy for a while */
    strncpy(fake_last_call, name, sizeof fake_last_call - 1);
    fake_last_count = count;
    fake_last_datatype = datatype;
    fake_last_op = op;
    fake_last_peer = peer;
    fake_last_stream = stream;
    if (datatype < 0 || datatype > 9 || op < 0 || op > 4) return 4; /* ncclInvalidArgument */
    return 0;
}

int ncclGetVersion(int *version) { *version = 22703; return 0; }

int ncclGetUniqueId(ncclUniqueId *id) {
    for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 7 + 1);
    return 0;
}

int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank) {
    if (nranks != 1 || rank != 0) return 5; /* ncclInvalidUsage: the fake has one rank */
    the_comm.nranks = nranks;
    the_comm.rank = rank;
    memcpy(the_comm.id, id.internal, 128);
    *comm = &the_comm;
    return 0;
}

/* The id as received by value, to check the struct crossed intact. */
const char *fake_comm_id(void) { return the_comm.id; }

int ncclCommDestroy(void *comm) { return comm == &the_comm ? 0 : 4; }
int ncclCommAbort(void *comm) { return comm == &the_comm ? 0 : 4; }
int ncclCommGetAsyncError(void *comm, int *err) { *err = 0; return comm == &the_comm ? 0 : 4; }

int ncclAllReduce(const void *s, void *r, size_t n, int t, int op, void *comm, void *stream) {
    int rc = record("ncclAllReduce", n, t, op, -1, stream);
    if (rc == 0) memmove(r, s, n * type_size[t]);
    return rc;
}
int ncclAllGather(const void *s, void *r, size_t n, int t, void *comm, void *stream) {
    int rc = record("ncclAllGather", n, t, 0, -1, stream);
    if (rc == 0) memmove(r, s, n * type_size[t]);
    return rc;
}
int ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, void *comm, void *stream) {
    int rc = record("ncclReduceScatter", n, t, op, -1, stream);
    if (rc == 0) memmove(r, s, n * type_size[t]);
    return rc;
}
int ncclBroadcast(const void *s, void *r, size_t n, int t, int root, void *comm, void *stream) {
    int rc = record("ncclBroadcast", n, t, 0, root, stream);
    if (rc == 0) memmove(r, s, n * type_size[t]);
    return rc;
}
int ncclSend(const void *s, size_t n, int t, int peer, void *comm, void *stream) {
    return record("ncclSend", n, t, 0, peer, stream);
}
int ncclRecv(void *r, size_t n, int t, int peer, void *comm, void *stream) {
    return record("ncclRecv", n, t, 0, peer, stream);
}
int ncclGroupStart(void) { fake_group_depth++; return 0; }
int ncclGroupEnd(void) { fake_group_depth--; return 0; }

const char *ncclGetErrorString(int result) {
    switch (result) {
    case 0: return "no error";
    case 4: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case 5: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    default: return "unknown result code";
    }
}
