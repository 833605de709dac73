/*
 * status.c: names for rh_status values.  Backends map their own error codes to rh_status at their
 * boundary; this file is the one place a status becomes text.
 */
#include "rehearsal.h"

const char *rh_status_string(rh_status status) {
  switch (status) {
  case RH_OK: return "ok";
  case RH_ERR_INVALID: return "invalid argument";
  case RH_ERR_NOMEM: return "out of memory";
  case RH_ERR_TIMEOUT: return "timed out waiting for a peer";
  case RH_ERR_PEER_DEAD: return "a peer died";
  case RH_ERR_MISMATCH: return "ranks issued mismatched collectives";
  case RH_ERR_BACKEND: return "backend error";
  case RH_ERR_UNSUPPORTED: return "not supported";
  case RH_ERR_IO: return "input/output error";
  case RH_ERR_ABORTED: return "a peer abandoned the collective after a failure";
  case RH_ERR_HOSTS_CHANGED: return "hosts were added or removed";
  case RH_ERR_TOO_FEW: return "fewer workers than min_np remain";
  case RH_ERR_EXCLUDED: return "this worker's host left the job";
  }
  return "unknown status";
}
