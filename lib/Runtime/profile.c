/* profile.c - IC_PROFILE: each kernel of each run timed into its slot's counters, and a
 * table per variant when the compiled graph is destroyed. */
#include <stdio.h>
#include "cpu-impl.h"

/* IC_PROFILE: the kernels one by one, each timed into the slot's counters (no locks: a slot
 * serves one run at a time; profile_print sums the slots). */
void ic__run_profiled(const ic__variant *v, ic__slot *slot)
{
    for (int k = 0; k < v->nkernels; k++) {
        double t = ic__now_ms();
        v->fns[k](ic__kernel_table(v, slot, k));
        slot->prof_ms[k] += ic__now_ms() - t;
    }
    slot->prof_runs++;
}

/* IC_PROFILE: per kernel of each variant, the runs, mean ms per run and share of the total. */
void ic__profile_print(const ic_compiled *cc, const ic__variant *v)
{
    int64_t runs = 0;
    double total = 0;
    for (const ic__slot *s = v->all_slots; s; s = s->next_all)
        runs += s->prof_runs;
    if (runs == 0)
        return;
    fprintf(stderr, "ic: profile of '%s' (%d kernels, %lld runs):\n", ic_graph_name(cc->g), v->nkernels,
            (long long)runs);
    for (int k = 0; k < v->nkernels; k++)
        for (const ic__slot *s = v->all_slots; s; s = s->next_all)
            total += s->prof_ms[k];
    fprintf(stderr, "  %-40s %10s %10s %7s\n", "kernel", "total ms", "ms/run", "share");
    for (int k = 0; k < v->nkernels; k++) {
        double ms = 0;
        for (const ic__slot *s = v->all_slots; s; s = s->next_all)
            ms += s->prof_ms[k];
        fprintf(stderr, "  %-40s %10.3f %10.3f %6.1f%%\n", ic_program_kernel(v->b.prog, k)->name, ms,
                ms / (double)runs, total > 0 ? 100.0 * ms / total : 0.0);
    }
    fprintf(stderr, "  %-40s %10.3f %10.3f\n", "all kernels", total, total / (double)runs);
}

