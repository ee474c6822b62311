// The MSL harness's execution model: every thread of a threadgroup a fiber, barriers honoured in a seeded shuffled order, threadgroups one after another, subnormals flushed (FTZ and DAZ) when asked.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ucontext.h>
#include <vector>
#include <xmmintrin.h>

struct LsThread {
    ucontext_t ctx;
    bool done;
    std::uint32_t lx, ly, lz, index;
};

struct LsSched {
    ucontext_t main;
    LsThread* running;
    std::vector<LsThread> threads;
    std::vector<char> stacks;
};

static thread_local LsSched* ls_sched = nullptr;

extern "C" void ls_harness_barrier(void) {
    LsThread* t = ls_sched->running;
    swapcontext(&t->ctx, &ls_sched->main);
}

// The kernel's body for one thread, written by the generated launcher.
static void ls_body(LsThread* t, std::uint32_t gx, std::uint32_t gy, std::uint32_t gz);

static std::uint32_t ls_group[3];

static void ls_entry() {
    LsThread* t = ls_sched->running;
    ls_body(t, ls_group[0], ls_group[1], ls_group[2]);
    t->done = true;
}

static std::uint64_t ls_next(std::uint64_t& s) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 33;
}

// Runs `groups` threadgroups of `size` threads; 0 on success, else a message in `err`.
static int ls_run(const std::uint32_t size[3], const std::uint32_t groups[3], std::uint64_t seed, int flush, char* err, std::size_t errlen) {
    const std::size_t n = std::size_t(size[0]) * size[1] * size[2];
    const std::size_t stack = 256 << 10;
    LsSched s;
    s.threads.resize(n);
    s.stacks.resize(n * stack);
    ls_sched = &s;
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(flush ? (csr | 0x8040u) : (csr & ~0x8040u));
    std::vector<std::size_t> order;
    int rc = 0;
    for (std::uint32_t gz = 0; gz < groups[2] && rc == 0; gz++)
        for (std::uint32_t gy = 0; gy < groups[1] && rc == 0; gy++)
            for (std::uint32_t gx = 0; gx < groups[0] && rc == 0; gx++) {
                ls_group[0] = gx;
                ls_group[1] = gy;
                ls_group[2] = gz;
                for (std::size_t i = 0; i < n; i++) {
                    LsThread& t = s.threads[i];
                    t.done = false;
                    t.index = std::uint32_t(i);
                    t.lx = std::uint32_t(i % size[0]);
                    t.ly = std::uint32_t((i / size[0]) % size[1]);
                    t.lz = std::uint32_t(i / (std::size_t(size[0]) * size[1]));
                    getcontext(&t.ctx);
                    t.ctx.uc_stack.ss_sp = &s.stacks[i * stack];
                    t.ctx.uc_stack.ss_size = stack;
                    t.ctx.uc_link = &s.main;
                    makecontext(&t.ctx, ls_entry, 0);
                }
                std::size_t live = n;
                while (live > 0) {
                    order.clear();
                    for (std::size_t i = 0; i < n; i++)
                        if (!s.threads[i].done) order.push_back(i);
                    for (std::size_t i = order.size(); i > 1; i--) std::swap(order[i - 1], order[ls_next(seed) % i]);
                    std::size_t finished = 0;
                    for (std::size_t i : order) {
                        s.running = &s.threads[i];
                        swapcontext(&s.main, &s.threads[i].ctx);
                        finished += s.threads[i].done;
                    }
                    if (finished != 0 && finished != order.size()) {
                        std::snprintf(err, errlen, "threadgroup (%u, %u, %u): %zu threads ended while %zu wait at a barrier", gx, gy, gz, finished, order.size() - finished);
                        rc = 1;
                        break;
                    }
                    live -= finished;
                }
            }
    _mm_setcsr(csr);
    ls_sched = nullptr;
    return rc;
}
