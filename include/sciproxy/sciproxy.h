/* sciproxy C ABI, for C and Fortran (iso_c_binding) callers: every family at once. Each family
 * has its own header in sciproxy/c/; the calling convention (input struct, options struct with
 * a defaults function, status code and sciproxy_last_error()) is described in sciproxy/c/core.h. */
#ifndef SCIPROXY_H
#define SCIPROXY_H

#include "sciproxy/c/core.h"
#include "sciproxy/c/diffusion.h"
#include "sciproxy/c/specex.h"
#include "sciproxy/c/stack.h"
#include "sciproxy/c/tti.h"
#include "sciproxy/c/wave.h"

#endif /* SCIPROXY_H */
