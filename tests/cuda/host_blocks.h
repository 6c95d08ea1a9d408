// Host prelude for kernels that cooperate within a block (warp shuffles, block-shared memory,
// barriers), for tests only: host_prelude.h plus the block words, with every GPU thread of a
// block run as a fiber (ucontext) on one host thread, so such kernels compute on the CPU what
// they compute on a GPU, deterministically. The one block runtime of both GPU targets: the
// CUDA families (tests/cuda/host_kernels.py) and the Metal sources (tests/metal/host_metal.h
// defines WB_HOST_METAL first: Metal's types; threadgroups are blocks, simdgroups warps).
//
// wb_host_launch(kernel, args, grid, block, shared) runs the grid one block after another. A
// fiber runs until it finishes or reaches a synchronisation point: a shuffle (which waits for
// the live lanes of its 32-lane warp, twice: values out, then in) or WB_BARRIER (which waits
// for the live threads of its block); waiting fibers are released when all live fibers of
// their warp (block) wait there. Anything else is a deadlock, which wb_host_launch reports by
// returning 1 instead of hanging. Block-shared memory is static storage (blocks never overlap
// in time).
#pragma once
#include "host_prelude.h"

#include <cstdio>
#include <cstdlib>
#include <ucontext.h>
#include <vector>

#undef WB_GLOBAL_ID
#undef WB_GLOBAL_SIZE

struct alignas(16) float4 {
    float x, y, z, w;
};

namespace wb_host {
enum State { RUN, WARP_WAIT, BLOCK_WAIT, DONE };
struct Fiber {
    ucontext_t ctx;
    State state;
};
inline std::vector<Fiber> fibers;
inline std::vector<std::vector<char>> stacks;
inline ucontext_t scheduler;
inline unsigned current = 0, threads = 1;
inline long long block = 0, blocks = 1;
inline unsigned char slots[1024][8];  // one shuffle value per thread
inline std::vector<unsigned char> dynamic_shared;
inline void* kernel = nullptr;
inline void** kernel_args = nullptr;

inline void wait(State state) {
    fibers[current].state = state;
    swapcontext(&fibers[current].ctx, &scheduler);
}

// Every kernel parameter is a reference (one pointer in the calling convention); a kernel is
// called with WB_HOST_ARGS pointers, the unused ones null (the caller pops what it pushed, so
// a kernel that declares fewer reads just its own).
#define WB_HOST_ARGS 24
typedef void* P;
typedef void (*Kernel)(P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P, P);
inline void call() {
    P* a = kernel_args;
    ((Kernel)kernel)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
                     a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22],
                     a[23]);
}

inline void entry() {
    call();
    fibers[current].state = DONE;  // uc_link resumes the scheduler
}

// Release the fibers waiting at a completed warp (or block) synchronisation; false if none.
inline bool release() {
    bool any = false;
    for (unsigned w = 0; w < threads; w += 32) {
        unsigned end = w + 32 < threads ? w + 32 : threads, live = 0, waiting = 0;
        for (unsigned t = w; t < end; ++t) {
            live += fibers[t].state != DONE;
            waiting += fibers[t].state == WARP_WAIT;
        }
        if (live && waiting == live) {
            for (unsigned t = w; t < end; ++t)
                if (fibers[t].state == WARP_WAIT) fibers[t].state = RUN;
            any = true;
        }
    }
    if (any) return true;
    unsigned live = 0, waiting = 0;
    for (unsigned t = 0; t < threads; ++t) {
        live += fibers[t].state != DONE;
        waiting += fibers[t].state == BLOCK_WAIT;
    }
    if (!live || waiting != live) return false;
    for (unsigned t = 0; t < threads; ++t)
        if (fibers[t].state == BLOCK_WAIT) fibers[t].state = RUN;
    return true;
}

inline int run_block() {
    for (unsigned t = 0; t < threads; ++t) {
        Fiber& f = fibers[t];
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = stacks[t].data();
        f.ctx.uc_stack.ss_size = stacks[t].size();
        f.ctx.uc_link = &scheduler;
        makecontext(&f.ctx, entry, 0);
        f.state = RUN;
    }
    for (;;) {
        bool ran = false;
        for (unsigned t = 0; t < threads; ++t) {
            if (fibers[t].state != RUN) continue;
            current = t;
            swapcontext(&scheduler, &fibers[t].ctx);
            ran = true;
        }
        bool done = true;
        for (unsigned t = 0; t < threads; ++t) done = done && fibers[t].state == DONE;
        if (done) return 0;
        if (!release() && !ran) return 1;
    }
}
}  // namespace wb_host

// Run kernel over grid blocks of block threads; args: WB_HOST_ARGS pointers. Returns 0, 1 on a
// deadlock, 2 for a block size outside 1..1024.
extern "C" int wb_host_launch(void* kernel, void** args, long long grid, unsigned block,
                              unsigned long long shared) {
    using namespace wb_host;
    if (block == 0 || block > 1024) return 2;
    wb_host::kernel = kernel;
    kernel_args = args;
    threads = block;
    blocks = grid;
    fibers.assign(block, Fiber());
    if (stacks.size() < block) stacks.resize(block, std::vector<char>(64 * 1024));
    dynamic_shared.assign(shared ? shared : 16, 0);
    for (wb_host::block = 0; wb_host::block < grid; ++wb_host::block)
        if (run_block()) return 1;
    return 0;
}

// What a nonzero status of wb_host_launch means.
extern "C" const char* wb_host_error(int status) {
    return status == 1 ? "deadlock" : status == 2 ? "block size outside 1..1024" : "unknown status";
}

#define WB_BLOCK_ID wb_host::block
#define WB_BLOCKS wb_host::blocks
#define WB_THREAD wb_host::current
#define WB_THREADS wb_host::threads
#define WB_GLOBAL_ID (wb_host::block * wb_host::threads + wb_host::current)
#define WB_GLOBAL_SIZE (wb_host::blocks * wb_host::threads)
#define WB_SHARED static
#define WB_SHARED_PTR(T) T*
#define WB_BARRIER() wb_host::wait(wb_host::BLOCK_WAIT)
#define WB_DYNAMIC_SHARED(T, name) T* name = (T*)wb_host::dynamic_shared.data()
#define WB_DYNAMIC_SHARED_ARG(T, name)
#define WB_THREAD_PARAMS
#define WB_THREAD_PASS

// v from the lane o above in the 32-lane warp (lanes past the end keep their own v).
template <typename T> inline T wb_shuffle_down(T v, int o) {
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    unsigned t = wb_host::current, lane = t & 31;
    memcpy(wb_host::slots[t], &v, sizeof(T));
    wb_host::wait(wb_host::WARP_WAIT);
    unsigned src = lane + o < 32 && t + o < wb_host::threads ? t + o : t;
    T r;
    memcpy(&r, wb_host::slots[src], sizeof(T));
    wb_host::wait(wb_host::WARP_WAIT);
    return r;
}
