/* The C ABI fuzz drivers of tests/capi/fuzz_capi.c for one precision: included twice, with T
 * (double or float), SFX(name) (name_f64 or name_f32) and NAME ("f64" or "f32") defined. Each
 * driver builds a small valid problem of random size, breaks at most one thing (the mutation,
 * named in failure messages), calls, and checks the status, the message and the inputs. */

/* ---- stack: parstack, parstack_extent, argmax ------------------------------------------- */

static void SFX(fuzz_stack)(long iterations) {
  enum { MAX_LEN = 8, MAX_RESULT = 512 };
  for (long it = 0; it < iterations; ++it) {
    T samples[2][MAX_LEN];
    const T* traces[2] = {samples[0], samples[1]};
    int64_t lengths[2] = {pick(MAX_LEN + 1), pick(MAX_LEN + 1)};
    int32_t offsets[2] = {(int32_t)pick(5) - 2, (int32_t)pick(5) - 2};
    int32_t shifts[4], result_offset = 0;
    T weights[4], result[MAX_RESULT];
    int64_t result_length = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < MAX_LEN; ++k) samples[i][k] = (T)((i + 1) * k % 5) - (T)2;
    for (int k = 0; k < 4; ++k) {
      shifts[k] = (int32_t)pick(7) - 3;
      weights[k] = (T)(pick(5) - 2) / (T)2;
    }
    SFX(sciproxy_parstack_input) in = {traces, lengths, 2, offsets, shifts, weights, 2};
    sciproxy_parstack_options o;
    sciproxy_parstack_options_default(&o);
    o.method = (int)pick(2);
    o.nparallel = (int)pick(3);
    o.device = pick(2) ? "cpu" : "reference";
    if (lengths[0] + lengths[1] == 0) lengths[0] = 1;
    const SFX(sciproxy_parstack_input)* input = &in;
    const sciproxy_parstack_options* options = &o;
    T* out = result;
    int64_t result_size = -2; /* -2: the size the window needs */
    int32_t* offset_out = &result_offset;
    const char* mutation = "none";
    switch (pick(26)) {
      case 0:
        input = NULL;
        mutation = "input NULL";
        break;
      case 1:
        options = NULL;
        mutation = "options NULL";
        break;
      case 2:
        in.traces = NULL;
        mutation = "traces NULL";
        break;
      case 3:
        in.lengths = NULL;
        mutation = "lengths NULL";
        break;
      case 4:
        in.offsets = NULL;
        mutation = "offsets NULL";
        break;
      case 5:
        in.shifts = NULL;
        mutation = "shifts NULL";
        break;
      case 6:
        in.weights = NULL;
        mutation = "weights NULL";
        break;
      case 7:
        traces[pick(2)] = NULL;
        mutation = "traces[i] NULL";
        break;
      case 8:
        out = NULL;
        mutation = "result NULL";
        break;
      case 9:
        offset_out = NULL;
        mutation = "offsetout NULL (allowed)";
        break;
      case 10:
        in.ntraces = kHugeCounts[pick(4)];
        mutation = "ntraces";
        break;
      case 11:
        in.nshifts = kHugeCounts[pick(4)];
        mutation = "nshifts";
        break;
      case 12:
        lengths[pick(2)] = pick(2) ? -1 : INT64_MIN;
        mutation = "negative length";
        break;
      case 13:
        o.struct_size = bad_struct_size(sizeof o);
        mutation = "struct_size";
        break;
      case 14: {
        const int methods[] = {2, -1, 1 << 30};
        o.method = methods[pick(3)];
        mutation = "method";
        break;
      }
      case 15: {
        const int64_t values[] = {0, -5, INT64_MIN, 1, 7};
        o.lengthout = values[pick(5)];
        mutation = "lengthout";
        break;
      }
      case 16:
        o.lengthout = INT64_MAX; /* method 0: the result's size cannot match */
        o.method = 0;
        mutation = "lengthout huge";
        break;
      case 17:
        o.offsetout = pick(2) ? INT32_MIN : INT32_MAX;
        o.lengthout = 3;
        mutation = "offsetout extreme";
        break;
      case 18:
        o.device = kDevices[pick(5)];
        mutation = "device";
        break;
      case 19:
        o.nparallel = -1;
        mutation = "nparallel -1";
        break;
      case 20:
        samples[pick(2)][pick(MAX_LEN)] = (T)NAN;
        mutation = "NaN sample";
        break;
      case 21:
        weights[pick(4)] = pick(2) ? (T)INFINITY : (T)NAN;
        mutation = "bad weight";
        break;
      case 22: {
        const int64_t sizes[] = {0, -1, 1, INT64_MAX};
        result_size = sizes[pick(4)];
        mutation = "result_size";
        break;
      }
      /* Extreme shifts and offsets make a window of ~2^31 samples: method 0 only, whose result
       * size then cannot match (method 1 would stack them all, a long but valid run). */
      case 23:
        shifts[pick(4)] = pick(2) ? INT32_MIN : INT32_MAX;
        o.method = 0;
        mutation = "shift extreme";
        break;
      case 24:
        offsets[pick(2)] = pick(2) ? INT32_MIN : INT32_MAX;
        o.method = 0;
        mutation = "offset extreme";
        break;
      default:
        o.accumulate = (int)pick(2);
        o.clamp_max_at_zero = (int)pick(2);
        break;
    }
    if (result_size == -2) {
      /* The window of the unbroken problem sizes the result (too small a buffer is not tried). */
      int32_t e_offset = 0;
      int64_t e_length = 0;
      sciproxy_parstack_options eo = o;
      eo.struct_size = sizeof eo;
      if (SFX(sciproxy_parstack_extent)(&in, &eo, &e_offset, &e_length) == SCIPROXY_OK &&
          in.nshifts == 2 && e_length * 2 <= MAX_RESULT && e_length > 0)
        result_size = o.method == 1 ? 2 : 2 * e_length;
      else
        result_size = 2;
    }
    uint64_t before = checksum(lengths, sizeof lengths) ^ checksum(offsets, sizeof offsets) ^
                      checksum(shifts, sizeof shifts) ^ checksum(weights, sizeof weights) ^
                      checksum(samples, sizeof samples);
    memset(result, 0, sizeof result);
    check_status(
        SFX(sciproxy_parstack)(input, options, out, result_size, offset_out, &result_length),
        "sciproxy_parstack_" NAME, it, mutation);
    check_status(SFX(sciproxy_parstack_extent)(input, options, pick(8) ? &result_offset : NULL,
                                               &result_length),
                 "sciproxy_parstack_extent_" NAME, it, mutation);
    uint64_t after = checksum(lengths, sizeof lengths) ^ checksum(offsets, sizeof offsets) ^
                     checksum(shifts, sizeof shifts) ^ checksum(weights, sizeof weights) ^
                     checksum(samples, sizeof samples);
    check_unchanged(before, after, "sciproxy_parstack_" NAME, it, mutation);

    /* argmax */
    T a[5 * 6];
    uint32_t where[6];
    for (int k = 0; k < 30; ++k) a[k] = (T)pick(5) - (T)2;
    SFX(sciproxy_argmax_input) ain = {a, 1 + pick(5), 1 + pick(6)};
    sciproxy_argmax_options ao;
    sciproxy_argmax_options_default(&ao);
    ao.pyrocko_compat = (int)pick(2);
    ao.nparallel = (int)pick(3) - 1;
    const SFX(sciproxy_argmax_input)* ainput = &ain;
    const sciproxy_argmax_options* aoptions = &ao;
    uint32_t* aout = where;
    const char* amutation = "none";
    switch (pick(10)) {
      case 0:
        ainput = NULL;
        amutation = "input NULL";
        break;
      case 1:
        ain.a = NULL;
        amutation = "a NULL";
        break;
      case 2:
        aout = NULL;
        amutation = "out NULL";
        break;
      case 3:
        aoptions = NULL;
        amutation = "options NULL";
        break;
      case 4:
        ao.struct_size = bad_struct_size(sizeof ao);
        amutation = "struct_size";
        break;
      case 5:
        ain.rows = kHugeCounts[pick(4)];
        ain.cols = 2 + pick(4);
        amutation = "rows";
        break;
      case 6:
        ain.cols = kHugeCounts[pick(4)];
        ain.rows = 2 + pick(3);
        amutation = "cols";
        break;
      case 7: {
        const T specials[] = {(T)NAN, (T)INFINITY, (T)-INFINITY};
        for (int k = 0; k < 3; ++k) a[pick(30)] = specials[pick(3)];
        amutation = "NaN and inf";
        break;
      }
      default:
        break;
    }
    before = checksum(a, sizeof a);
    check_status(SFX(sciproxy_argmax)(ainput, aoptions, aout), "sciproxy_argmax_" NAME, it,
                 amutation);
    check_unchanged(before, checksum(a, sizeof a), "sciproxy_argmax_" NAME, it, amutation);
  }
}

/* ---- wave: scalar, state_shape, gradient, born, born_gradient ----------------------------- */

static void SFX(fuzz_scalar)(long iterations) {
  enum { MAXC = 8 * 8, NSHOTS = 2, NSRC = 2, NREC = 2, MAXNT = 4, MAXPAD = 64 * 64 };
  for (long it = 0; it < iterations; ++it) {
    const int64_t shape[2] = {4 + pick(4), 4 + pick(4)};
    const int64_t cells = shape[0] * shape[1], nt = 1 + pick(MAXNT);
    T v[NSHOTS * MAXC], scatter[NSHOTS * MAXC], amps[NSHOTS * NSRC * MAXNT];
    T grad_r[NSHOTS * NREC * MAXNT];
    int64_t src[NSHOTS * NSRC * 2], rec[NSHOTS * NREC * 2], bg[NSHOTS * NREC * 2];
    static T out_r[NSHOTS * NREC * MAXNT], out_bg[NSHOTS * NREC * MAXNT], grad_v[NSHOTS * MAXC],
        grad_src[NSHOTS * NSRC * MAXNT], fields[10][NSHOTS * MAXPAD];
    for (int k = 0; k < NSHOTS * MAXC; ++k) {
      v[k] = (T)(1500 + 10 * (k % 7));
      scatter[k] = (T)(k % 3);
    }
    for (int k = 0; k < NSHOTS * NSRC * MAXNT; ++k) amps[k] = (T)((k % 5) - 2);
    for (int k = 0; k < NSHOTS * NREC * MAXNT; ++k) grad_r[k] = (T)1;
    for (int s = 0; s < NSHOTS; ++s)
      for (int k = 0; k < 2; ++k) { /* distinct source cells per shot */
        src[(s * NSRC + k) * 2] = k;
        src[(s * NSRC + k) * 2 + 1] = pick(shape[1]);
        rec[(s * NREC + k) * 2] = pick(shape[0]);
        rec[(s * NREC + k) * 2 + 1] = pick(shape[1]);
        bg[(s * NREC + k) * 2] = pick(shape[0]);
        bg[(s * NREC + k) * 2 + 1] = pick(shape[1]);
      }
    SFX(sciproxy_scalar_born_input) born;
    memset(&born, 0, sizeof born);
    SFX(sciproxy_scalar_input)* in = &born.background;
    in->ndim = 2;
    in->shape[0] = shape[0];
    in->shape[1] = shape[1];
    in->spacing[0] = in->spacing[1] = 5.0;
    in->v = v;
    in->nmodels = pick(2) ? 1 : NSHOTS;
    in->dt = 0.001;
    in->nt = nt;
    in->nshots = NSHOTS;
    in->nsources = NSRC;
    in->nreceivers = NREC;
    in->source_amplitudes = amps;
    in->source_locations = src;
    in->receiver_locations = rec;
    born.scatter = scatter;
    born.nbg_receivers = pick(3);
    born.bg_receiver_locations = bg;
    sciproxy_scalar_options o;
    sciproxy_scalar_options_default(&o);
    o.accuracy = pick(2) ? 2 : 4;
    for (int i = 0; i < 6; ++i) o.pml_width[i] = pick(2);
    o.nparallel = (int)pick(2);
    o.device = pick(2) ? "cpu" : "reference";
    o.storage = pick(2) ? SCIPROXY_STORAGE_HOST : SCIPROXY_STORAGE_NONE;
    const sciproxy_scalar_options* options = &o;
    const SFX(sciproxy_scalar_born_input)* binput = &born;
    const SFX(sciproxy_scalar_input)* input = in;
    T *receivers = out_r, *bg_receivers = out_bg, *gv = grad_v, *gs = grad_src;
    const T* gr = grad_r;
    SFX(sciproxy_scalar_state) state, final_state;
    memset(&state, 0, sizeof state);
    memset(&final_state, 0, sizeof final_state);
    int64_t padded[3] = {0, 0, 0};
    const SFX(sciproxy_scalar_state)* initial = NULL;
    SFX(sciproxy_scalar_state)* final_out = NULL;
    if (SFX(sciproxy_scalar_state_shape)(in, &o, padded) == SCIPROXY_OK &&
        padded[0] * padded[1] <= MAXPAD) {
      state.padded_shape[0] = final_state.padded_shape[0] = padded[0];
      state.padded_shape[1] = final_state.padded_shape[1] = padded[1];
      for (int k = 0; k < NSHOTS * MAXPAD; ++k) fields[0][k] = (T)0;
      if (pick(3) == 0) {
        state.wavefield = fields[0]; /* zeros: a state at rest */
        initial = &state;
      }
      if (pick(2)) {
        final_state.wavefield = fields[1];
        final_state.previous_wavefield = fields[2];
        final_state.psi[0] = fields[3];
        final_state.zeta[1] = fields[4];
        final_out = &final_state;
      }
    }
    const char* mutation = "none";
    switch (pick(40)) {
      case 0:
        input = NULL;
        binput = NULL;
        mutation = "input NULL";
        break;
      case 1:
        options = NULL;
        mutation = "options NULL";
        break;
      case 2:
        in->v = NULL;
        mutation = "v NULL";
        break;
      case 3:
        in->source_amplitudes = NULL;
        mutation = "source_amplitudes NULL";
        break;
      case 4:
        in->source_locations = NULL;
        mutation = "source_locations NULL";
        break;
      case 5:
        in->receiver_locations = NULL;
        mutation = "receiver_locations NULL";
        break;
      case 6:
        receivers = NULL;
        bg_receivers = NULL;
        mutation = "outputs NULL";
        break;
      case 7:
        gr = NULL;
        gv = NULL;
        mutation = "gradient arrays NULL";
        break;
      case 8: {
        const int dims[] = {0, 4, -1, 1 << 30};
        in->ndim = dims[pick(4)];
        mutation = "ndim";
        break;
      }
      case 9:
        in->shape[pick(2)] = kHugeCounts[pick(4)];
        mutation = "shape";
        break;
      case 10:
        in->spacing[pick(2)] = bad_real();
        mutation = "spacing";
        break;
      case 11: {
        const double dts[] = {NAN, 0.0, -1.0, INFINITY, 1e300};
        in->dt = dts[pick(5)];
        mutation = "dt";
        break;
      }
      case 12:
        in->nt = kHugeCounts[1 + pick(3)];
        mutation = "nt";
        break;
      case 13:
        in->nshots = kHugeCounts[pick(4)];
        mutation = "nshots";
        break;
      case 14:
        in->nsources = kHugeCounts[pick(4)];
        mutation = "nsources";
        break;
      case 15:
        in->nreceivers = kHugeCounts[pick(4)];
        mutation = "nreceivers";
        break;
      case 16: {
        const int64_t values[] = {0, -1, 3, INT64_MAX, INT64_MIN};
        in->nmodels = values[pick(5)];
        mutation = "nmodels";
        break;
      }
      case 17: {
        const int64_t values[] = {-1, INT64_MAX, INT64_MIN, -(INT64_C(1) << 31), 100};
        int64_t* loc = pick(2) ? src : rec;
        loc[pick(NSHOTS * 2 * 2)] = values[pick(5)];
        mutation = "location value";
        break;
      }
      case 18:
        o.struct_size = bad_struct_size(sizeof o);
        mutation = "struct_size";
        break;
      case 19: {
        const int values[] = {0, 3, 10, -2, 1 << 30};
        o.accuracy = values[pick(5)];
        mutation = "accuracy";
        break;
      }
      case 20:
        o.pml_width[pick(6)] = kHugeCounts[1 + pick(3)];
        mutation = "pml_width";
        break;
      case 21: {
        const int64_t values[] = {-2, INT64_MAX, INT64_MIN, 0, 1};
        o.survey_pad[pick(6)] = values[pick(5)];
        mutation = "survey_pad";
        break;
      }
      case 22:
        o.has_origin = 1;
        o.origin[pick(3)] = kHugeCounts[pick(4)];
        mutation = "origin";
        break;
      case 23: {
        const int values[] = {-1, 4, 99};
        o.storage = values[pick(3)];
        mutation = "storage";
        break;
      }
      case 24:
        o.storage = SCIPROXY_STORAGE_DISK;
        o.storage_directory = pick(2) ? NULL : "/no/such/directory";
        mutation = "storage_directory";
        break;
      case 25:
        o.freq_taper_frac = pick(2) ? NAN : 2.0;
        mutation = "freq_taper_frac";
        break;
      case 26:
        o.time_pad_frac = pick(2) ? NAN : -1.0;
        mutation = "time_pad_frac";
        break;
      case 27:
        o.pml_freq = bad_real();
        mutation = "pml_freq";
        break;
      case 28:
        o.max_vel = bad_real();
        mutation = "max_vel";
        break;
      case 29:
        o.model_gradient_sampling_interval = kHugeCounts[pick(4)];
        mutation = "model_gradient_sampling_interval";
        break;
      case 30:
        o.device = kDevices[pick(5)];
        mutation = "device";
        break;
      case 31:
        v[pick(cells)] = pick(2) ? (T)NAN : (T)-INFINITY;
        mutation = "NaN in v";
        break;
      case 32:
        amps[pick(NSHOTS * NSRC * nt)] = (T)NAN;
        mutation = "NaN amplitude";
        break;
      case 33:
        state.padded_shape[pick(2)] = kHugeCounts[pick(4)];
        state.wavefield = fields[0];
        initial = &state;
        mutation = "initial padded_shape";
        break;
      case 34:
        born.scatter = NULL;
        mutation = "scatter NULL";
        break;
      case 35:
        born.nbg_receivers = kHugeCounts[1 + pick(3)];
        mutation = "nbg_receivers";
        break;
      case 36:
        born.bg_receiver_locations = NULL;
        born.nbg_receivers = 1;
        mutation = "bg NULL";
        break;
      case 37:
        scatter[pick(cells)] = (T)INFINITY;
        mutation = "inf scatter";
        break;
      case 38:
        gr = NULL;
        mutation = "grad_receiver_amplitudes NULL";
        break;
      default:
        break;
    }
    const uint64_t before = checksum(v, sizeof v) ^ checksum(amps, sizeof amps) ^
                            checksum(src, sizeof src) ^ checksum(rec, sizeof rec) ^
                            checksum(bg, sizeof bg) ^ checksum(scatter, sizeof scatter) ^
                            checksum(grad_r, sizeof grad_r) ^ checksum(fields[0], sizeof fields[0]);
    const int which = (int)pick(5);
    int64_t shape_out[3];
    switch (which) {
      case 0:
        check_status(SFX(sciproxy_scalar)(input, options, initial, receivers, final_out),
                     "sciproxy_scalar_" NAME, it, mutation);
        break;
      case 1:
        check_status(SFX(sciproxy_scalar_state_shape)(input, options, pick(6) ? shape_out : NULL),
                     "sciproxy_scalar_state_shape_" NAME, it, mutation);
        break;
      case 2:
        check_status(SFX(sciproxy_scalar_gradient)(input, options, initial, gr, NULL, gv,
                                                   pick(2) ? gs : NULL, NULL),
                     "sciproxy_scalar_gradient_" NAME, it, mutation);
        break;
      case 3:
        check_status(SFX(sciproxy_scalar_born)(binput, options, receivers, bg_receivers),
                     "sciproxy_scalar_born_" NAME, it, mutation);
        break;
      default:
        check_status(
            SFX(sciproxy_scalar_born_gradient)(binput, options, gr, NULL, gv, pick(2) ? gs : NULL),
            "sciproxy_scalar_born_gradient_" NAME, it, mutation);
        break;
    }
    const uint64_t after = checksum(v, sizeof v) ^ checksum(amps, sizeof amps) ^
                           checksum(src, sizeof src) ^ checksum(rec, sizeof rec) ^
                           checksum(bg, sizeof bg) ^ checksum(scatter, sizeof scatter) ^
                           checksum(grad_r, sizeof grad_r) ^ checksum(fields[0], sizeof fields[0]);
    check_unchanged(before, after, "sciproxy_scalar_*_" NAME, it, mutation);
  }
}

/* ---- tti: forward, adjoint, max_dt ---------------------------------------------------------- */

static void SFX(fuzz_tti)(long iterations) {
  enum { N = 6, CELLS = N * N * N, NSHOTS = 2, NSRC = 2, NREC = 2, MAXNT = 3 };
  for (long it = 0; it < iterations; ++it) {
    T vp[CELLS], eps[CELLS], amps[NSHOTS * NSRC * MAXNT], data[NSHOTS * NREC * MAXNT];
    static T out_r[NSHOTS * NREC * MAXNT], out_s[NSHOTS * NSRC * MAXNT];
    int64_t src[NSHOTS * NSRC * 3], rec[NSHOTS * NREC * 3];
    const int64_t n = 4 + pick(3), nt = 1 + pick(MAXNT);
    for (int k = 0; k < CELLS; ++k) {
      vp[k] = (T)(2000 + k % 11);
      eps[k] = (T)0.1;
    }
    for (int k = 0; k < NSHOTS * NSRC * MAXNT; ++k) amps[k] = (T)((k % 3) - 1);
    for (int k = 0; k < NSHOTS * NREC * MAXNT; ++k) data[k] = (T)((k % 4) - 1);
    for (int k = 0; k < NSHOTS * NSRC * 3; ++k) src[k] = pick(n);
    for (int k = 0; k < NSHOTS * NREC * 3; ++k) rec[k] = pick(n);
    SFX(sciproxy_tti_input) in;
    memset(&in, 0, sizeof in);
    for (int d = 0; d < 3; ++d) {
      in.model.shape[d] = n;
      in.model.spacing[d] = 10.0;
    }
    in.model.vp = vp;
    in.model.epsilon = pick(2) ? eps : NULL;
    in.nt = nt;
    in.nshots = NSHOTS;
    in.nsources = NSRC;
    in.nreceivers = NREC;
    in.source_amplitudes = amps;
    in.source_locations = src;
    in.receiver_locations = rec;
    sciproxy_tti_options o;
    sciproxy_tti_options_default(&o);
    o.space_order = 4;
    for (int i = 0; i < 6; ++i) o.sponge_width[i] = pick(2);
    o.free_surface = (int)pick(2);
    o.device = pick(2) ? "cpu" : "reference";
    o.nparallel = (int)pick(2);
    double max_dt = 0;
    if (SFX(sciproxy_tti_max_dt)(&in, &o, &max_dt) != SCIPROXY_OK) {
      fprintf(stderr, "sciproxy_tti_max_dt_" NAME ": the valid problem was refused: %s\n",
              sciproxy_last_error());
      ++failures;
    }
    in.dt = 0.5 * max_dt;
    const SFX(sciproxy_tti_input)* input = &in;
    const sciproxy_tti_options* options = &o;
    T *receivers = out_r, *sources = out_s;
    const T* receiver_data = data;
    double* max_dt_out = &max_dt;
    const char* mutation = "none";
    switch (pick(30)) {
      case 0:
        input = NULL;
        mutation = "input NULL";
        break;
      case 1:
        options = NULL;
        mutation = "options NULL";
        break; /* max_dt only (below) */
      case 2:
        in.model.vp = NULL;
        mutation = "vp NULL";
        break;
      case 3:
        in.source_amplitudes = NULL;
        mutation = "source_amplitudes NULL";
        break;
      case 4:
        in.source_locations = NULL;
        mutation = "source_locations NULL";
        break;
      case 5:
        in.receiver_locations = NULL;
        mutation = "receiver_locations NULL";
        break;
      case 6:
        receivers = NULL;
        sources = NULL;
        receiver_data = NULL;
        max_dt_out = NULL;
        mutation = "outputs NULL";
        break;
      case 7:
        in.model.shape[pick(3)] = kHugeCounts[pick(4)];
        mutation = "model.shape";
        break;
      case 8:
        in.model.spacing[pick(3)] = bad_real();
        mutation = "model.spacing";
        break;
      case 9:
        in.dt = bad_real();
        mutation = "dt";
        break;
      case 10:
        in.nt = kHugeCounts[pick(4)];
        mutation = "nt";
        break;
      case 11:
        in.nshots = kHugeCounts[pick(4)];
        mutation = "nshots";
        break;
      case 12:
        in.nsources = kHugeCounts[pick(4)];
        mutation = "nsources";
        break;
      case 13:
        in.nreceivers = kHugeCounts[pick(4)];
        mutation = "nreceivers";
        break;
      case 14: {
        const int64_t values[] = {-1, INT64_MAX, INT64_MIN, -(INT64_C(1) << 31), 100};
        int64_t* loc = pick(2) ? src : rec;
        loc[pick(NSHOTS * 2 * 3)] = values[pick(5)];
        mutation = "location value";
        break;
      }
      case 15:
        o.struct_size = bad_struct_size(sizeof o);
        mutation = "struct_size";
        break;
      case 16: {
        const int values[] = {0, 5, -4, 1 << 30, 6};
        o.space_order = values[pick(5)];
        mutation = "space_order";
        break;
      }
      case 17:
        o.sponge_width[pick(6)] = kHugeCounts[1 + pick(3)];
        mutation = "sponge_width";
        break;
      case 18:
        o.q_min = bad_real();
        mutation = "q_min";
        break;
      case 19:
        o.q_interior = bad_real();
        mutation = "q_interior";
        break;
      case 20:
        o.freq_q = bad_real();
        mutation = "freq_q";
        break;
      case 21:
        o.default_f = bad_real();
        mutation = "default_f";
        break;
      case 22:
        o.device = kDevices[pick(5)];
        mutation = "device";
        break;
      case 23:
        vp[pick(CELLS)] = pick(2) ? (T)NAN : (T)-1;
        mutation = "bad vp";
        break;
      case 24:
        eps[pick(CELLS)] = (T)NAN;
        in.model.epsilon = eps;
        mutation = "NaN epsilon";
        break;
      case 25:
        amps[pick(NSHOTS * NSRC * nt)] = (T)INFINITY;
        mutation = "inf amplitude";
        break;
      case 26:
        data[pick(NSHOTS * NREC * nt)] = (T)NAN;
        mutation = "NaN receiver data";
        break;
      default:
        break;
    }
    const uint64_t before = checksum(vp, sizeof vp) ^ checksum(eps, sizeof eps) ^
                            checksum(amps, sizeof amps) ^ checksum(data, sizeof data) ^
                            checksum(src, sizeof src) ^ checksum(rec, sizeof rec);
    /* Default options pad with 60-cell sponges: the stability limit only, not a run. */
    switch (options == NULL ? 2 : pick(3)) {
      case 0:
        check_status(SFX(sciproxy_tti)(input, options, receivers), "sciproxy_tti_" NAME, it,
                     mutation);
        break;
      case 1:
        check_status(SFX(sciproxy_tti_adjoint)(input, options, receiver_data, sources),
                     "sciproxy_tti_adjoint_" NAME, it, mutation);
        break;
      default:
        check_status(SFX(sciproxy_tti_max_dt)(input, options, max_dt_out),
                     "sciproxy_tti_max_dt_" NAME, it, mutation);
        break;
    }
    const uint64_t after = checksum(vp, sizeof vp) ^ checksum(eps, sizeof eps) ^
                           checksum(amps, sizeof amps) ^ checksum(data, sizeof data) ^
                           checksum(src, sizeof src) ^ checksum(rec, sizeof rec);
    check_unchanged(before, after, "sciproxy_tti_*_" NAME, it, mutation);
  }
}

/* ---- tti demo: run and dt_limit ------------------------------------------------------------ */

static void SFX(fuzz_tti_demo)(long iterations) {
  enum { N = 9, CELLS = N * N * N, MAXNT = 3 };
  for (long it = 0; it < iterations; ++it) {
    T vp[CELLS], theta[CELLS], amps[MAXNT];
    static T u[CELLS], u_prev[CELLS];
    const int64_t n = 8 + pick(2);
    for (int k = 0; k < CELLS; ++k) {
      vp[k] = (T)(1500 + k % 13);
      theta[k] = (T)0.3;
    }
    for (int k = 0; k < MAXNT; ++k) amps[k] = (T)(k + 1);
    SFX(sciproxy_tti_demo_input) in;
    memset(&in, 0, sizeof in);
    for (int d = 0; d < 3; ++d) {
      in.shape[d] = n;
      in.spacing[d] = 10.0;
      in.source_position[d] = 35.0;
    }
    in.nt = 1 + pick(MAXNT);
    in.vp = 1500;
    in.b = 1;
    in.epsilon = 0.2;
    in.eta = 0.4;
    in.f = 0.85;
    in.theta = 0.5;
    in.phi = 0.3;
    in.damping = 0.001;
    in.vp_field = pick(2) ? vp : NULL;
    in.theta_field = pick(2) ? theta : NULL;
    in.source_amplitudes = amps;
    sciproxy_tti_demo_options o;
    sciproxy_tti_demo_options_default(&o);
    o.space_order = 4;
    o.form = (int)pick(2);
    o.device = pick(2) ? "cpu" : "reference";
    o.nparallel = (int)pick(2);
    double limit = 0;
    if (SFX(sciproxy_tti_demo_dt_limit)(&in, &o, &limit) != SCIPROXY_OK) {
      fprintf(stderr, "sciproxy_tti_demo_dt_limit_" NAME ": the valid problem was refused: %s\n",
              sciproxy_last_error());
      ++failures;
    }
    in.dt = 0.5 * limit;
    const SFX(sciproxy_tti_demo_input)* input = &in;
    const sciproxy_tti_demo_options* options = &o;
    T *u_out = pick(4) ? u : NULL, *u_prev_out = pick(4) ? u_prev : NULL;
    double* limit_out = &limit;
    const char* mutation = "none";
    switch (pick(20)) {
      case 0:
        input = NULL;
        mutation = "input NULL";
        break;
      case 1:
        options = NULL;
        mutation = "options NULL";
        break;
      case 2:
        in.source_amplitudes = NULL;
        mutation = "source_amplitudes NULL";
        break;
      case 3:
        limit_out = NULL;
        mutation = "dt_limit NULL";
        break;
      case 4: {
        const int64_t values[] = {0, -1, INT64_MIN, 3};
        in.shape[pick(3)] = values[pick(4)];
        mutation = "shape";
        break;
      }
      case 5:
        in.shape[pick(3)] = pick(2) ? INT64_MAX : 100001;
        in.vp_field = in.theta_field = NULL; /* no array the shape would size */
        mutation = "shape huge";
        break;
      case 6:
        in.spacing[pick(3)] = bad_real();
        mutation = "spacing";
        break;
      case 7:
        in.dt = bad_real();
        mutation = "dt";
        break;
      case 8: {
        const int64_t values[] = {0, -1, INT64_MIN};
        in.nt = values[pick(3)];
        mutation = "nt";
        break;
      }
      case 9:
        in.nt = INT64_MAX;
        in.source_amplitudes = NULL;
        mutation = "nt huge";
        break;
      case 10:
        in.vp = bad_real();
        in.vp_field = NULL;
        mutation = "vp";
        break;
      case 11:
        in.eta = bad_real();
        mutation = "eta";
        break;
      case 12:
        in.f = bad_real();
        mutation = "f";
        break;
      case 13:
        in.source_position[pick(3)] = bad_real();
        mutation = "source_position";
        break;
      case 14:
        o.struct_size = bad_struct_size(sizeof o);
        mutation = "struct_size";
        break;
      case 15: {
        const int values[] = {0, 3, 6, 1 << 30, -8};
        o.space_order = values[pick(5)];
        mutation = "space_order";
        break;
      }
      case 16: {
        const int values[] = {-1, 2, 1 << 30};
        o.form = values[pick(3)];
        mutation = "form";
        break;
      }
      case 17:
        o.device = kDevices[pick(5)];
        mutation = "device";
        break;
      case 18:
        vp[pick(CELLS)] = (T)NAN;
        in.vp_field = vp;
        mutation = "NaN vp field";
        break;
      default:
        amps[pick(MAXNT)] = (T)INFINITY;
        mutation = "inf amplitude";
        break;
    }
    const uint64_t before =
        checksum(vp, sizeof vp) ^ checksum(theta, sizeof theta) ^ checksum(amps, sizeof amps);
    if (pick(3)) {
      check_status(SFX(sciproxy_tti_demo)(input, options, u_out, u_prev_out),
                   "sciproxy_tti_demo_" NAME, it, mutation);
    } else {
      check_status(SFX(sciproxy_tti_demo_dt_limit)(input, options, limit_out),
                   "sciproxy_tti_demo_dt_limit_" NAME, it, mutation);
    }
    const uint64_t after =
        checksum(vp, sizeof vp) ^ checksum(theta, sizeof theta) ^ checksum(amps, sizeof amps);
    check_unchanged(before, after, "sciproxy_tti_demo_*_" NAME, it, mutation);
  }
}
