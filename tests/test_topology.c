/*
 * test_topology.c: Horovod's rank assignment.  Expected values are written out by hand from
 * horovod/runner/common/util/hosts.py: ranks fill hosts in order, local_rank is the slot on the
 * host, cross_rank the index of the host among those with that local rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

typedef struct expect {
  int local_rank, local_size, cross_rank, cross_size;
} expect;

static void check(const int *slots, int nodes, const expect *want) {
  rh_topology t;
  assert_int_equal(rh_topology_init(&t, slots, nodes), RH_OK);
  rh_settings s;
  char err[64];
  rh_settings_init(&s, err, sizeof err);
  for (int r = 0; r < t.size; r++) {
    rh_ctx ctx;
    rh_ctx_init(&ctx, r, &t, &s, NULL, NULL, NULL);
    assert_int_equal(rh_rank(&ctx), r);
    assert_int_equal(rh_size(&ctx), t.size);
    assert_int_equal(rh_local_rank(&ctx), want[r].local_rank);
    assert_int_equal(rh_local_size(&ctx), want[r].local_size);
    assert_int_equal(rh_cross_rank(&ctx), want[r].cross_rank);
    assert_int_equal(rh_cross_size(&ctx), want[r].cross_size);
  }
  rh_topology_free(&t);
}

static void test_uneven_3_2(void **state) {
  (void)state;
  const int slots[] = {3, 2};
  const expect want[] = {{0, 3, 0, 2}, {1, 3, 0, 2}, {2, 3, 0, 1}, {0, 2, 1, 2}, {1, 2, 1, 2}};
  check(slots, 2, want);
}

static void test_uneven_2_3_1(void **state) {
  (void)state;
  const int slots[] = {2, 3, 1};
  const expect want[] = {{0, 2, 0, 3}, {1, 2, 0, 2}, {0, 3, 1, 3},
                         {1, 3, 1, 2}, {2, 3, 0, 1}, {0, 1, 2, 3}};
  check(slots, 3, want);
}

static void test_uniform_2x4(void **state) {
  (void)state;
  const int slots[] = {4, 4};
  expect want[8];
  for (int r = 0; r < 8; r++) want[r] = (expect){r % 4, 4, r / 4, 2};
  check(slots, 2, want);
}

static void test_single(void **state) {
  (void)state;
  const int slots[] = {1};
  const expect want[] = {{0, 1, 0, 1}};
  check(slots, 1, want);
}

static void test_groups(void **state) {
  (void)state;
  const int slots[] = {3, 2};
  rh_topology t;
  assert_int_equal(rh_topology_init(&t, slots, 2), RH_OK);
  assert_false(rh_topology_uniform(&t));
  rh_ctx ctx;
  rh_ctx_init(&ctx, 4, &t, NULL, NULL, NULL, NULL);
  assert_int_equal(ctx.node.n, 2);
  assert_int_equal(ctx.node.ranks[0], 3);
  assert_int_equal(ctx.node.ranks[1], 4);
  assert_int_equal(ctx.cross.n, 2);
  assert_int_equal(ctx.cross.ranks[0], 1);
  assert_int_equal(ctx.cross.ranks[1], 4);
  assert_int_not_equal(ctx.node.id, ctx.cross.id);
  rh_topology_free(&t);
}

/* mpirun may place ranks round-robin: 5 ranks on hosts A B A B A */
static void test_round_robin_placement(void **state) {
  (void)state;
  const int node_of[] = {0, 1, 0, 1, 0};
  rh_topology t;
  assert_int_equal(rh_topology_init_map(&t, node_of, 5), RH_OK);
  const expect want[] = {{0, 3, 0, 2}, {0, 2, 1, 2}, {1, 3, 0, 2}, {1, 2, 1, 2}, {2, 3, 0, 1}};
  for (int r = 0; r < 5; r++) {
    rh_ctx ctx;
    rh_ctx_init(&ctx, r, &t, NULL, NULL, NULL, NULL);
    assert_int_equal(rh_local_rank(&ctx), want[r].local_rank);
    assert_int_equal(rh_local_size(&ctx), want[r].local_size);
    assert_int_equal(rh_cross_rank(&ctx), want[r].cross_rank);
    assert_int_equal(rh_cross_size(&ctx), want[r].cross_size);
  }
  rh_ctx ctx;
  rh_ctx_init(&ctx, 2, &t, NULL, NULL, NULL, NULL);
  assert_int_equal(ctx.node.ranks[0], 0);
  assert_int_equal(ctx.node.ranks[1], 2);
  assert_int_equal(ctx.node.ranks[2], 4);
  const int gap[] = {0, 2}; /* host numbers must appear in order */
  rh_topology bad;
  assert_int_equal(rh_topology_init_map(&bad, gap, 2), RH_ERR_INVALID);
  rh_topology_free(&t);
}

static void test_invalid(void **state) {
  (void)state;
  rh_topology t;
  const int zero[] = {2, 0};
  assert_int_equal(rh_topology_init(&t, zero, 2), RH_ERR_INVALID);
  assert_int_equal(rh_topology_init(&t, zero, 0), RH_ERR_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uneven_3_2),  cmocka_unit_test(test_uneven_2_3_1),
      cmocka_unit_test(test_uniform_2x4), cmocka_unit_test(test_single),
      cmocka_unit_test(test_groups),      cmocka_unit_test(test_invalid),
      cmocka_unit_test(test_round_robin_placement),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
