// The MSL harness's execution model: every thread of a threadgroup a fiber, barriers honoured in a seeded shuffled order, threadgroups spread over the host's cores, subnormals flushed (FTZ and DAZ) when asked.
#pragma once
#pragma push_macro("thread")
#undef thread
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
#include <xmmintrin.h>

// Switches stacks: saves the callee-saved registers on the current stack, stores its pointer in *save, and resumes the stack at next (x86-64 System V).
extern "C" void ls_switch(void** save, void* next);
asm(R"(
    .text
    .globl ls_switch
    .type ls_switch, @function
ls_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size ls_switch, .-ls_switch
)");

// Where a fiber waits: not yet started, at a threadgroup barrier, or at a simdgroup exchange.
enum LsWait : std::uint8_t { LS_START, LS_BARRIER, LS_SIMD };

struct LsThread {
    void* sp;
    bool done;
    LsWait wait;
    std::uint32_t lx, ly, lz, index;
};

struct LsSched {
    void* main;
    LsThread* running;
    std::vector<LsThread> threads;
    // One 16-byte slot per thread for simdgroup shuffles.
    std::vector<unsigned char> lanes;
};

// The fibers' stacks, kept for the OS thread's life so their pages are mapped once, freed when it ends.
struct LsStacks {
    char* base = nullptr;
    std::size_t bytes = 0;
    ~LsStacks() { std::free(base); }
};
static thread_local LsStacks ls_stacks;

static thread_local LsSched* ls_sched = nullptr;

extern "C" void ls_harness_barrier(void) {
    LsThread* t = ls_sched->running;
    t->wait = LS_BARRIER;
    ls_switch(&t->sp, ls_sched->main);
}

// A simdgroup exchange point: every lane of the thread's simdgroup arrives before any goes on.
static void ls_simd_sync(LsThread* t) {
    t->wait = LS_SIMD;
    ls_switch(&t->sp, ls_sched->main);
}

// Lane `lane`'s value of `v` in the calling thread's simdgroup of 32 (an exchange point before and after the read).
extern "C" void ls_harness_shuffle(const void* v, void* out, std::size_t bytes, std::uint32_t lane) {
    LsThread* t = ls_sched->running;
    unsigned char* slots = ls_sched->lanes.data();
    std::memcpy(slots + 16 * std::size_t(t->index), v, bytes);
    ls_simd_sync(t);
    const std::size_t src = std::size_t(t->index & ~31u) + (lane & 31u);
    std::memcpy(out, slots + 16 * (src < ls_sched->threads.size() ? src : t->index), bytes);
    ls_simd_sync(t);
}

// The kernel's body for one thread, written by the generated launcher.
static void ls_body(LsThread* t, std::uint32_t gx, std::uint32_t gy, std::uint32_t gz);

static thread_local std::uint32_t ls_group[3];

// A fiber's first frame: runs the body, then hands the stack back for good.
static void ls_entry() {
    LsThread* t = ls_sched->running;
    ls_body(t, ls_group[0], ls_group[1], ls_group[2]);
    t->done = true;
    ls_switch(&t->sp, ls_sched->main);
    std::abort();
}

// A fresh stack whose first switch enters ls_entry with the alignment a call would give.
static void* ls_stack(char* base, std::size_t size) {
    std::uintptr_t top = (reinterpret_cast<std::uintptr_t>(base) + size) & ~std::uintptr_t(15);
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;
    *--sp = reinterpret_cast<void*>(&ls_entry);
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    return sp;
}

static std::uint64_t ls_next(std::uint64_t& s) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 33;
}

// Runs the threadgroups `first`, `first + step`, ... of the grid on this OS thread; 0 on success, else a message in `err`.
static int ls_run_part(const std::uint32_t size[3], const std::uint32_t groups[3], std::uint64_t seed, int flush, std::size_t first, std::size_t step, char* err, std::size_t errlen) {
    const std::size_t n = std::size_t(size[0]) * size[1] * size[2];
    const std::size_t stack = 256 << 10;
    LsSched s;
    s.threads.resize(n);
    s.lanes.assign(16 * n, 0);
    if (ls_stacks.bytes < n * stack) {
        std::free(ls_stacks.base);
        ls_stacks.base = static_cast<char*>(std::malloc(n * stack));
        ls_stacks.bytes = ls_stacks.base ? n * stack : 0;
        if (!ls_stacks.base) {
            std::snprintf(err, errlen, "no memory for %zu fiber stacks", n);
            return 1;
        }
    }
    ls_sched = &s;
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(flush ? (csr | 0x8040u) : (csr & ~0x8040u));
    std::vector<std::size_t> order;
    const std::size_t total = std::size_t(groups[0]) * groups[1] * groups[2];
    int rc = 0;
    for (std::size_t g = first; g < total && rc == 0; g += step) {
        const std::uint32_t gx = std::uint32_t(g % groups[0]), gy = std::uint32_t((g / groups[0]) % groups[1]), gz = std::uint32_t(g / (std::size_t(groups[0]) * groups[1]));
        ls_group[0] = gx;
        ls_group[1] = gy;
        ls_group[2] = gz;
        for (std::size_t i = 0; i < n; i++) {
            LsThread& t = s.threads[i];
            t.done = false;
            t.wait = LS_START;
            t.index = std::uint32_t(i);
            t.lx = std::uint32_t(i % size[0]);
            t.ly = std::uint32_t((i / size[0]) % size[1]);
            t.lz = std::uint32_t(i / (std::size_t(size[0]) * size[1]));
            t.sp = ls_stack(ls_stacks.base + i * stack, stack);
        }
        std::size_t live = n;
        std::size_t ended = 0;
        while (live > 0) {
            // fibers at a simdgroup exchange go on first; threadgroup barriers open only when no fiber is between exchanges
            order.clear();
            bool simd = false;
            for (std::size_t i = 0; i < n; i++) simd |= !s.threads[i].done && s.threads[i].wait == LS_SIMD;
            for (std::size_t i = 0; i < n; i++)
                if (!s.threads[i].done && (!simd || s.threads[i].wait == LS_SIMD)) order.push_back(i);
            if (simd) {
                for (std::size_t i = 0; i < n && rc == 0; i++) {
                    const LsThread& t = s.threads[i];
                    const LsThread& first = s.threads[i & ~std::size_t(31)];
                    if (!t.done && (t.wait == LS_SIMD) != (first.wait == LS_SIMD && !first.done)) {
                        std::snprintf(err, errlen, "threadgroup (%u, %u, %u): simdgroup %zu: a shuffle reached by some lanes only", gx, gy, gz, i / 32);
                        rc = 1;
                    }
                }
                if (rc != 0) break;
            } else if (ended != 0 && order.size() != 0 && s.threads[order[0]].wait == LS_BARRIER) {
                std::snprintf(err, errlen, "threadgroup (%u, %u, %u): %zu threads ended while %zu wait at a barrier", gx, gy, gz, ended, order.size());
                rc = 1;
                break;
            }
            for (std::size_t i = order.size(); i > 1; i--) std::swap(order[i - 1], order[ls_next(seed) % i]);
            std::size_t finished = 0;
            for (std::size_t i : order) {
                s.running = &s.threads[i];
                ls_switch(&s.main, s.threads[i].sp);
                finished += s.threads[i].done;
            }
            if (!simd && finished != 0 && finished != order.size()) {
                bool between = false;
                for (std::size_t i : order) between |= !s.threads[i].done && s.threads[i].wait == LS_SIMD;
                if (!between) {
                    std::snprintf(err, errlen, "threadgroup (%u, %u, %u): %zu threads ended while %zu wait at a barrier", gx, gy, gz, finished, order.size() - finished);
                    rc = 1;
                    break;
                }
            }
            ended += finished;
            live -= finished;
        }
    }
    _mm_setcsr(csr);
    ls_sched = nullptr;
    return rc;
}

// Runs `groups` threadgroups of `size` threads over the host's cores (threadgroups are independent, as on a GPU); 0 on success, else a message in `err`.
static int ls_run(const std::uint32_t size[3], const std::uint32_t groups[3], std::uint64_t seed, int flush, char* err, std::size_t errlen) {
    const std::size_t total = std::size_t(groups[0]) * groups[1] * groups[2];
    std::size_t workers = std::thread::hardware_concurrency();
    workers = workers == 0 ? 1 : (workers < total ? workers : (total == 0 ? 1 : total));
    std::vector<std::thread> pool;
    std::vector<int> rcs(workers, 0);
    std::vector<std::vector<char>> errs(workers, std::vector<char>(errlen, 0));
    for (std::size_t w = 1; w < workers; w++)
        pool.emplace_back([&, w] { rcs[w] = ls_run_part(size, groups, seed ^ (0x9e3779b97f4a7c15ull * w), flush, w, workers, errs[w].data(), errlen); });
    rcs[0] = ls_run_part(size, groups, seed, flush, 0, workers, errs[0].data(), errlen);
    for (auto& t : pool) t.join();
    for (std::size_t w = 0; w < workers; w++)
        if (rcs[w] != 0) {
            std::memcpy(err, errs[w].data(), errlen);
            return rcs[w];
        }
    return 0;
}
#pragma pop_macro("thread")
