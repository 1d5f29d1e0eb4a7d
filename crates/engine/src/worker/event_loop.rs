//! The worker's event loop: opening the connections before the start, sending what
//! comes due on its lanes, waiting (on epoll, or quietly through responses), and the
//! end of the window (the drain, an interrupt, timeouts).
//!
//! What happens to one request on one connection is [`super::connection`].

use super::*;

impl Worker {
    pub(super) fn new(
        id: usize,
        conn_offset: usize,
        conns: usize,
        shared: Arc<Shared>,
        tx: Sender<Msg>,
        recycled: Receiver<Box<Interval>>,
    ) -> io::Result<Worker> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        // HTTP/2: `conns` connections of `streams` slots each.
        let (sessions, slots) = match shared.h2.as_deref() {
            Some(setup) => (h2::sessions(setup, conns), conns * setup.streams),
            None => (Vec::new(), conns),
        };
        let streams = shared.h2.as_ref().map_or(1, |h| h.streams);
        let markers = http1::marker::MarkerScan::new(&shared.markers);
        let conn_list = (0..slots)
            .map(|i| Conn {
                session: if sessions.is_empty() {
                    NO_SESSION
                } else {
                    (i / streams) as u32
                },
                stream_open: false,
                answer: Answer::new(markers.clone()),
                sock: None,
                tls: None,
                phase: Phase::Closed,
                generation: 0,
                lane: 0,
                host: 0,
                target: 0,
                busy: false,
                measured: false,
                sampled: false,
                intended: 0,
                dispatched: 0,
                deadline: 0,
                written: 0,
                head: [0; 5],
                head_len: 0,
                peer_closed: false,
                closed_by_server: false,
                reused: false,
                last_status: 0,
                rx_stamp: 0,
                // Lenient: a response curl takes is not a failure of the proxy under
                // test (docs/load.md, "What responses the engine accepts").
                parser: ResponseParser::with_strictness(
                    &shared.backend_header,
                    shared.mix.targets[0].head,
                    Strictness::Lenient,
                )
                .with_markers(&shared.markers),
            })
            .collect();
        Ok(Worker {
            id,
            tx,
            recycled,
            ep,
            events: Vec::with_capacity(1024),
            conns: conn_list,
            lanes: Vec::new(),
            lane_key: Vec::new(),
            lane_host: Vec::new(),
            heap: BinaryHeap::new(),
            blocked: BinaryHeap::new(),
            quiet: false,
            scheduled: false,
            opening: 0,
            rec: Recorder::new(0),
            scratch: vec![0u8; 64 * 1024].into_boxed_slice(),
            busy: 0,
            measure_start: 0,
            end: 0,
            rng: sampling_seed(id, shared.slice.as_ref().map_or(0, |s| s.seed)),
            answered: false,
            tls_version: None,
            sessions,
            h2_events: Vec::with_capacity(64),
            h2_retried: 0,
            h2_opened: 0,
            h2_dirty: Vec::with_capacity(64),
            shared,
        }
        .with_lanes(conn_offset))
    }

    pub(super) fn with_lanes(mut self, conn_offset: usize) -> Self {
        // Lanes are built with origin 0 and shifted once the start is known.
        let s = &self.shared;
        let (rate, conn_offset, total_conns, origin) = match &s.slice {
            None => (s.rate, conn_offset, s.connections, 0),
            // One generator of several, wrk2's schedule: its connections' lanes are
            // the whole run's lanes for those connections (same interval, same
            // phases), so the generators together send one generator's schedule.
            Some(sl) if s.model == Model::PerConnection => (
                sl.total_rate,
                sl.first_connection + conn_offset,
                sl.total_connections,
                0,
            ),
            // The shared schedule queues per thread at this generator's rate, moved
            // to its first connection's phase so generators do not fire in unison.
            Some(sl) => (
                s.rate,
                conn_offset,
                s.connections,
                sl.total_rate
                    .map_or(0, |r| (sl.first_connection as f64 * 1e9 / r) as Nanos),
            ),
        };
        // The schedule is per connection; with HTTP/2 a connection has several
        // slots, all in its lane.
        let streams = s.h2.as_ref().map_or(1, |h| h.streams);
        let physical = self.conns.len() / streams;
        self.lanes = lanes_for_worker(
            s.model,
            rate,
            s.profile.as_ref(),
            origin,
            Share {
                worker: self.id,
                workers: s.workers,
                conn_offset,
                conns: physical,
                total_conns,
            },
        );
        let per_lane = physical.div_ceil(self.lanes.len().max(1));
        let conn_host = &self.shared.mix.conn_host;
        for (i, c) in self.conns.iter_mut().enumerate() {
            let p = i / streams;
            c.lane = (p / per_lane.max(1)).min(self.lanes.len() - 1) as u32;
            c.host = conn_host.get(conn_offset + p).copied().unwrap_or(0);
        }
        for (k, sess) in self.sessions.iter_mut().enumerate() {
            sess.host = conn_host.get(conn_offset + k).copied().unwrap_or(0);
        }
        self.lane_key = vec![u64::MAX; self.lanes.len()];
        self.lane_host = vec![0; self.lanes.len()];
        for (i, c) in self.conns.iter().enumerate().rev() {
            let l = c.lane as usize;
            self.lane_key[l] = (conn_offset + i / streams) as u64;
            self.lane_host[l] = c.host;
        }
        // Idle slots are taken from the end: the first stream of every connection
        // before the second of any, so that light load spreads over connections.
        let mut order: Vec<usize> = (0..self.conns.len()).collect();
        order.sort_by_key(|&i| (i % streams, i / streams));
        for &i in order.iter().rev() {
            let l = self.conns[i].lane as usize;
            self.lanes[l].idle.push(i as u32);
        }
        self
    }

    /// # Errors
    /// An epoll failure other than an interrupted wait: the worker cannot go on.
    pub(super) fn run(&mut self, passed: &std::cell::Cell<usize>) -> io::Result<()> {
        if !self.shared.new_connection {
            self.preconnect()?;
        }
        self.rec.totals.wakeup_ns = measure_wakeup(&self.shared.clock);
        // Meet the other workers; the coordinator publishes the start in between.
        self.shared.gate.wait();
        passed.set(1);
        self.shared.gate.wait();
        passed.set(2);
        let start = self.shared.start.load(Ordering::Acquire);
        self.measure_start = start + self.shared.warmup_ns;
        self.end = self.measure_start + self.shared.duration_ns;
        if self.shared.stop.load(Ordering::Relaxed) {
            // Interrupted while opening connections: the window never begins, so
            // nothing was due and nothing is measured.
            self.end = self.measure_start;
        }
        let wakeup = std::mem::take(&mut self.rec.totals.wakeup_ns);
        self.rec = Recorder::new(self.measure_start);
        self.rec.totals.wakeup_ns = wakeup;
        self.rec.totals.mix = crate::mix::MixTally::for_mix(&self.shared.mix);
        self.rec.end_window(self.end);
        if self.shared.sample > 0.0 {
            // Room for the expected sample, so the hot path rarely grows the vector.
            let expect = self.shared.rate.unwrap_or(10_000.0) * self.shared.sample
                / self.shared.workers as f64
                * (self.shared.duration_ns as f64 / 1e9)
                * 1.2;
            self.rec
                .totals
                .samples
                .reserve(expect.min(5e6) as usize + 64);
        }
        let lanes = std::mem::take(&mut self.lanes);
        self.lanes = lanes.into_iter().map(|l| l.shifted(start)).collect();
        for (i, l) in self.lanes.iter().enumerate() {
            self.heap.push(Reverse((l.due(start), i as u32)));
        }
        // A closed loop sends when a response comes: it must wake for each.
        // With several HTTP/2 streams on a connection, one read can hold responses
        // that arrived apart, and one receive stamp cannot tell them apart: such a
        // worker wakes for every response instead.
        let multiplexed = self.shared.h2.as_ref().is_some_and(|h| h.streams > 1);
        self.scheduled = !self.lanes.is_empty() && self.lanes.iter().all(Lane::open_loop);
        self.quiet = !multiplexed && self.scheduled;
        self.main_loop()
    }

    /// Opens every connection (and TLS session) before the schedule starts, as wrk
    /// does, so the first second does not measure a thousand handshakes.
    pub(super) fn preconnect(&mut self) -> io::Result<()> {
        let clock = self.shared.clock;
        let deadline = clock.now() + self.shared.connect_timeout_ns;
        if !self.sessions.is_empty() {
            return self.preconnect_sessions(deadline);
        }
        for i in 0..self.conns.len() {
            self.open(i, clock.now());
        }
        loop {
            let now = clock.now();
            let pending = self
                .conns
                .iter()
                .filter(|c| matches!(c.phase, Phase::Connecting | Phase::Handshaking))
                .count();
            if pending == 0 || now >= deadline || self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            self.wait_and_handle(deadline.min(now + SWEEP_NS))?;
        }
        // Whatever did not connect in time is closed; requests will reopen it.
        for i in 0..self.conns.len() {
            if matches!(self.conns[i].phase, Phase::Connecting | Phase::Handshaking) {
                self.close(i);
            }
        }
        Ok(())
    }

    /// [`Self::preconnect`] for HTTP/2: every connection up (its preface sent)
    /// before the schedule starts.
    pub(super) fn preconnect_sessions(&mut self, deadline: Nanos) -> io::Result<()> {
        let clock = self.shared.clock;
        for si in 0..self.sessions.len() {
            self.session_open(si, clock.now());
        }
        loop {
            let now = clock.now();
            let pending = self
                .sessions
                .iter()
                .filter(|s| matches!(s.phase, Phase::Connecting | Phase::Handshaking))
                .count();
            if pending == 0 || now >= deadline || self.shared.stop.load(Ordering::Relaxed) {
                break;
            }
            self.wait_and_handle(deadline.min(now + SWEEP_NS))?;
        }
        for si in 0..self.sessions.len() {
            if matches!(
                self.sessions[si].phase,
                Phase::Connecting | Phase::Handshaking
            ) {
                self.close_session(si);
            }
        }
        Ok(())
    }

    pub(super) fn main_loop(&mut self) -> io::Result<()> {
        let clock = self.shared.clock;
        let mut stage = Stage::Window;
        // When the window ended (its planned end, or the interrupt).
        let mut closed_at: Option<Nanos> = None;
        let mut next_sweep = 0;
        // This thread's voluntary context switches when the window began.
        let mut switches: Option<Option<u64>> = None;
        loop {
            let now = clock.now();
            if switches.is_none() && now >= self.measure_start {
                switches = Some(voluntary_switches());
            }
            if let Some(iv) = self.rec.roll(now) {
                let _ = self.tx.send(Msg::Interval(self.id, iv));
                // What the collector cleared since, for the next seconds.
                while let Ok(spare) = self.recycled.try_recv() {
                    self.rec.give_back(spare);
                }
            }
            let stop = self.shared.stop.load(Ordering::Relaxed);
            if stage == Stage::Window && (stop || now >= self.end) {
                let at = now.min(self.end);
                closed_at = Some(at);
                let _ = self.shared.stopped_at.compare_exchange(
                    0,
                    at,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                self.rec.end_window(at);
                self.rec.totals.sleeps = match (switches.flatten(), voluntary_switches()) {
                    (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                    _ => None,
                };
                self.close_window(at, now);
                stage = Stage::Drain {
                    deadline: self.end + self.shared.timeout_ns,
                };
            }
            if matches!(stage, Stage::Drain { .. }) && stop {
                stage = self.stop_sending(now);
            }
            if !matches!(stage, Stage::Interrupted { .. }) {
                self.dispatch_due(now);
                self.flush_dirty();
            }
            match stage {
                Stage::Window => {}
                Stage::Drain { deadline } => {
                    // Done when nothing is in flight and nothing due is left (a lane
                    // with requests left is on the heap, or blocked behind a busy
                    // connection).
                    if self.busy == 0 && self.heap.is_empty() {
                        break;
                    }
                    if now >= deadline {
                        // Requests that reached their own timeout are timeouts as
                        // always; only what remains is cut short by the deadline.
                        self.sweep(now);
                        self.cut_drain(deadline);
                        break;
                    }
                }
                Stage::Interrupted { until } => {
                    if self.busy == 0 {
                        break;
                    }
                    if now >= until {
                        self.abandon_in_flight();
                        break;
                    }
                }
            }
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + SWEEP_NS;
            }
            let limit = match stage {
                Stage::Window => self.end,
                Stage::Drain { deadline } => deadline,
                Stage::Interrupted { until } => until,
            };
            let mut wake = next_sweep.min(self.rec.next_roll()).min(limit);
            // (Empty after an interrupt.)
            if let Some(Reverse((due, _))) = self.heap.peek() {
                wake = wake.min(*due);
            }
            let quiet = match stage {
                Stage::Window => self.quiet_until(now),
                _ => None,
            };
            match quiet {
                Some(until) => self.sleep_and_handle(wake.min(until))?,
                None => self.wait_and_handle(wake)?,
            }
        }
        // The last second of the window, with what completed during the drain; none
        // when the run was stopped before its window began.
        if closed_at.is_some_and(|at| self.rec.window_started(at)) {
            let iv = self.rec.take_interval();
            let _ = self.tx.send(Msg::Interval(self.id, iv));
        }
        for i in 0..self.conns.len() {
            self.close(i);
        }
        for si in 0..self.sessions.len() {
            self.close_session(si);
        }
        self.rec.totals.h2 = self.h2_totals();
        let mut totals = std::mem::take(&mut self.rec.totals);
        totals.tls_version = totals.tls_version.or(self.tls_version);
        let _ = self.tx.send(Msg::Done(self.id, Box::new(totals)));
        Ok(())
    }

    /// Sends every request that is due, or due within the send window, and has an
    /// idle connection.
    pub(super) fn dispatch_due(&mut self, now: Nanos) {
        let horizon = now + self.shared.send_window_ns;
        while let Some(&Reverse((due, li))) = self.heap.peek() {
            if due > horizon {
                break;
            }
            self.heap.pop();
            let lane = &mut self.lanes[li as usize];
            if lane.finished {
                continue;
            }
            if lane.open_loop() && due >= self.end {
                lane.finished = true;
                continue;
            }
            let Some(ci) = lane.idle.pop() else {
                lane.blocked = true;
                if self.quiet {
                    self.blocked.push(Reverse((due, li)));
                }
                continue;
            };
            let measured = due >= self.measure_start;
            let open_loop = lane.open_loop();
            let target = self.shared.mix.pick(
                self.lane_host[li as usize],
                self.lane_key[li as usize],
                lane.next_index(),
            );
            let lag = if open_loop && measured {
                // Sent early (within the window): not late at all.
                Some(now.saturating_sub(due.max(lane.unblocked_at)))
            } else {
                None
            };
            lane.advance();
            let next = lane.due(now);
            if open_loop && next >= self.end {
                // Nothing more of this lane is due in the window: it is done, and is
                // not kept on the heap to be woken for at a time past the end.
                lane.finished = true;
            } else if lane.idle.is_empty() {
                lane.blocked = true;
                if self.quiet {
                    self.blocked.push(Reverse((next, li)));
                }
            } else {
                self.heap.push(Reverse((next, li)));
            }
            if measured {
                self.rec.sent(lag);
                if let Some(st) = step_of(&self.shared.step_bounds, self.measure_start, due) {
                    self.rec.totals.steps.sent(st, lag);
                }
            }
            // Closed loop has no schedule to be late for: a request is intended when
            // it is sent, so corrected and uncorrected latency are the same figure.
            let intended = if open_loop { due } else { now };
            self.start_request(ci as usize, target, intended, measured, now);
        }
    }

    /// The window ends at `at` (its planned end, or an interrupt), noticed at `now`:
    /// counts what was due in it and what had been started, says why the rest was
    /// behind ([`results::Shortfall`]), and leaves on the heap only the lanes that
    /// still have requests due in the window, for the drain. Once per run.
    pub(super) fn close_window(&mut self, at: Nanos, now: Nanos) {
        let t = &mut self.rec.totals;
        t.sent_in_window = t.sent;
        if !self.lanes.iter().all(|l| l.open_loop()) {
            // Closed loop: a request is intended when it is sent, and none is after
            // the end; nothing was behind.
            t.intended = t.sent;
            for l in &mut self.lanes {
                l.finished = true;
            }
            self.heap.clear();
            return;
        }
        // Per lane, its busy connections still opening and those awaiting a response.
        let mut busy = vec![(0u64, 0u64); self.lanes.len()];
        for c in self.conns.iter().filter(|c| c.busy) {
            let (opening, answering) = &mut busy[c.lane as usize];
            match c.phase {
                Phase::Active => *answering += 1,
                _ => *opening += 1,
            }
        }
        let mut intended = 0;
        t.steps_intended = vec![0; self.shared.step_bounds.len()];
        for (l, (opening, answering)) in self.lanes.iter().zip(busy) {
            // A request due within the send window is sent early; an interrupt can
            // fall between its send and its due time. It was sent and is counted, so
            // it is intended too: the lane's count runs to its last request taken.
            let end = if l.next_index() > l.first_at_or_after(at) {
                l.due_at(l.next_index() - 1) + 1
            } else {
                at
            };
            intended += l.due_between(self.measure_start, end);
            for (n, (a, b)) in t.steps_intended.iter_mut().zip(&self.shared.step_bounds) {
                let (a, b) = (self.measure_start + a, (self.measure_start + b).min(end));
                if a < b {
                    *n += l.due_between(a, b);
                }
            }
            let first = l.first_at_or_after(self.measure_start).max(l.next_index());
            let last = l.first_at_or_after(at);
            if first >= last {
                continue;
            }
            if !l.idle.is_empty() {
                // A connection is free: the end fell between their due time (or the
                // moment the connection came free) and this turn of the loop. Within
                // the lag limit that is the loop's ordinary wake-up: they count as
                // started in the window, at its edge (they go out in this turn, or
                // after an interrupt are `not_sent` like any other). Beyond the
                // limit the generator was late.
                for k in first..last {
                    let lag = now.saturating_sub(l.due_at(k).max(l.unblocked_at));
                    if lag <= crate::LAG_LIMIT_NS {
                        t.sent_in_window += 1;
                    } else {
                        t.shortfall.generator_late += 1;
                    }
                }
            } else if opening > answering {
                t.shortfall.connections_failed += last - first;
            } else {
                t.shortfall.connections_busy += last - first;
            }
        }
        t.intended = intended;
        for l in &mut self.lanes {
            if l.due(now) >= at {
                l.finished = true;
            }
        }
        self.heap.retain(|Reverse((due, _))| *due < at);
    }

    /// An interrupt (in the window or during the drain): nothing more is sent, and
    /// what was due but never started is `not_sent`. Returns the stage that waits a
    /// moment for the requests in flight.
    pub(super) fn stop_sending(&mut self, now: Nanos) -> Stage {
        self.heap.clear();
        for l in &mut self.lanes {
            l.finished = true;
        }
        let t = &mut self.rec.totals;
        t.interrupted = true;
        t.not_sent = t.intended.saturating_sub(t.sent);
        Stage::Interrupted {
            until: now + INTERRUPT_DRAIN_NS,
        }
    }

    /// The drain's deadline has come: every measured request still waiting, for a
    /// connection or for its response, is a `timeout`, recorded at its latency so far
    /// (from its intended time to `deadline`): a lower bound, and the tail stays in
    /// the percentiles instead of vanishing from them.
    pub(super) fn cut_drain(&mut self, deadline: Nanos) {
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            if !c.busy {
                continue;
            }
            if c.measured {
                let (intended, origin, dispatched, sampled) =
                    (c.intended, c.origin(), c.dispatched, c.sampled);
                let group = self.shared.mix.targets[c.target as usize].group;
                self.censor(
                    group,
                    intended,
                    origin,
                    Some(deadline.saturating_sub(dispatched)),
                    sampled,
                    deadline,
                );
            }
            self.conns[ci].busy = false;
            self.busy -= 1;
            self.close(ci);
        }
        for li in 0..self.lanes.len() {
            let l = &self.lanes[li];
            let first = l.first_at_or_after(self.measure_start).max(l.next_index());
            let last = if l.open_loop() {
                l.first_at_or_after(self.end)
            } else {
                first
            };
            for k in first..last {
                let intended = self.lanes[li].due_at(k);
                let sampled = self.sample_next();
                let target = self
                    .shared
                    .mix
                    .pick(self.lane_host[li], self.lane_key[li], k);
                let group = self.shared.mix.targets[target as usize].group;
                self.censor(group, intended, intended, None, sampled, deadline);
                self.rec.totals.timed_out_unsent += 1;
            }
            self.lanes[li].finished = true;
        }
        self.heap.clear();
    }

    /// One request cut short by the drain's deadline `at` (see [`Worker::cut_drain`]);
    /// `uncorrected_ns`: how long since it was started, if it was; `origin`: what its
    /// latency counts from ([`Conn::origin`]).
    ///
    /// Its latency is recorded only if the run has received a response: a lower
    /// bound on an answer is worth keeping from a server that answers, but from one
    /// that never did it would be the only latency of the run, made of nothing but
    /// the drain's cut-offs. A run that received no response keeps no latency at all
    /// (docs/results.md), and the request is a plain `timeout`.
    pub(super) fn censor(
        &mut self,
        group: u32,
        intended: Nanos,
        origin: Nanos,
        uncorrected_ns: Option<u64>,
        sampled: bool,
        at: Nanos,
    ) {
        let latency = at.saturating_sub(origin);
        let record = self.answered || self.shared.answered.load(Ordering::Relaxed);
        if record {
            self.rec.censored(latency, uncorrected_ns);
        } else {
            self.rec.error(ErrorKind::Timeout);
        }
        self.rec.totals.mix.censored(group, latency, record);
        let step = step_of(&self.shared.step_bounds, self.measure_start, intended);
        let t = &mut self.rec.totals;
        let windows = self.shared.marks.as_ref().map(|m| m.window_of(intended));
        for (w, tally) in [(windows, &mut t.windows), (step, &mut t.steps)] {
            if let Some(w) = w {
                if record {
                    tally.censored(w, latency);
                } else {
                    tally.error(w, ErrorKind::Timeout);
                }
            }
        }
        t.first_errors.note(
            ErrorKind::Timeout,
            &Cause::DrainDeadline {
                after: self.shared.timeout_ns,
            },
        );
        if sampled {
            t.samples.push(RawSample {
                intended,
                latency_ns: latency,
                status: 0,
                error: 1 + ErrorKind::Timeout.index() as u8,
                backend: -1,
            });
        }
    }

    pub(super) fn abandon_in_flight(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].busy {
                if self.conns[i].measured {
                    self.rec.totals.unfinished += 1;
                }
                self.conns[i].busy = false;
                self.busy -= 1;
                self.close(i);
            }
        }
    }

    /// Fails every request past its deadline.
    pub(super) fn sweep(&mut self, now: Nanos) {
        self.sweep_sessions(now);
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            if !c.busy || c.deadline > now {
                continue;
            }
            // HTTP/2: a connection late to open fails its requests itself (above).
            if c.session != NO_SESSION && c.phase == Phase::Connecting {
                continue;
            }
            let s = &self.shared;
            let f = match c.phase {
                Phase::Connecting | Phase::Closed => Failure::new(
                    ErrorKind::ConnectTimeout,
                    Cause::ConnectDeadline {
                        after: s.connect_timeout_ns,
                        tls: false,
                    },
                ),
                Phase::Handshaking => Failure::new(
                    ErrorKind::ConnectTimeout,
                    Cause::ConnectDeadline {
                        after: s.connect_timeout_ns,
                        tls: true,
                    },
                ),
                Phase::Active | Phase::Idle => Failure::new(
                    ErrorKind::Timeout,
                    Cause::ResponseDeadline {
                        after: s.timeout_ns,
                    },
                ),
            };
            self.fail(ci, f);
        }
    }

    /// Whether this wait may sleep through responses, and until when at the latest:
    /// the first due time (less the send window) of a lane waiting for a connection,
    /// whose response must be read by then. Not while a connection is opening (a handshake step would wait),
    /// nor once a waiting lane is due (the response it waits for is read as soon as
    /// it comes).
    ///
    /// Why: on a virtual machine a wake-up costs more CPU than a request (an
    /// interrupt across cores, a timer armed, a context switch each way), and at a
    /// fixed rate most wake-ups were for responses, one by one. Sleeping only until
    /// the next send, the thread reads every response that arrived meanwhile in one
    /// pass, each timed by the kernel's receive stamp ([`crate::rx`]), so no latency
    /// grows by the sleep.
    pub(super) fn quiet_until(&mut self, now: Nanos) -> Option<Nanos> {
        if !self.quiet || self.opening > 0 {
            return None;
        }
        while let Some(&Reverse((due, li))) = self.blocked.peek() {
            let lane = &self.lanes[li as usize];
            if lane.blocked && !lane.finished && lane.due(now) == due {
                // Its request may go as early as the send window allows.
                let by = due.saturating_sub(self.shared.send_window_ns);
                return (by > now).then_some(by);
            }
            self.blocked.pop();
        }
        Some(Nanos::MAX)
    }

    /// Sleeps until `wake` whatever arrives meanwhile, then handles every event
    /// that did (see [`Worker::quiet_until`]).
    pub(super) fn sleep_and_handle(&mut self, wake: Nanos) -> io::Result<()> {
        let wait = wake.saturating_sub(self.shared.clock.now());
        if wait > 0 {
            let ts = timespec(wait);
            let _ =
                rustix::thread::clock_nanosleep_relative(rustix::thread::ClockId::Monotonic, &ts);
        }
        self.wait_and_handle(0)
    }

    /// Waits for events until `wake` at the latest and handles them.
    pub(super) fn wait_and_handle(&mut self, wake: Nanos) -> io::Result<()> {
        // The clock is read again here, not taken from the top of the loop: the
        // iteration's own work (dispatching, events, the sweep) would otherwise be
        // added to every sleep, and every request after it would be that much late.
        let wait = wake.saturating_sub(self.shared.clock.now());
        let ts = timespec(wait);
        epoll_wait(&self.ep, &mut self.events, &ts)?;
        let events = std::mem::take(&mut self.events);
        for ev in &events {
            let key = ev.data.u64();
            let ci = (key & 0xffff_ffff) as usize;
            let generation = (key >> 32) as u32;
            if !self.sessions.is_empty() {
                if ci < self.sessions.len() && self.sessions[ci].generation == generation {
                    self.on_session_event(ci, ev.flags);
                }
                continue;
            }
            if ci >= self.conns.len() || self.conns[ci].generation != generation {
                continue;
            }
            self.on_event(ci, ev.flags);
            self.dispatch_if_due();
        }
        self.events = events;
        Ok(())
    }

    /// Sends what came due while a wait's events were being handled, before the
    /// next event. A wait can bring hundreds of responses at once (a quiet wait
    /// sleeps through them; a busy thread finds them queued), and reading and
    /// decrypting them all first held back every send due meanwhile: the late sends'
    /// responses then came back together, the next pass was longer still, and the
    /// lateness fed on itself (issue 40: S1's 1000 TLS connections at 30,000 req/s
    /// on one core swung between a lag p99 of 0.3 ms and 10 ms). Responses keep
    /// their kernel receive stamps ([`crate::rx`]), so reading them a little later
    /// costs them nothing; a send that waits is late for good. One clock read per
    /// event, and only while a lane is waiting on the heap.
    ///
    /// Open loop only: a closed loop has no schedule to be late for. (The 11 %
    /// fewer requests a second seen at `--max` while this ran there too came from
    /// the stall probe, not from this: it stayed with this limited to open loop and
    /// went with the probe, docs/benchmarks.md.)
    #[inline]
    pub(super) fn dispatch_if_due(&mut self) {
        if !self.scheduled {
            return;
        }
        let Some(&Reverse((due, _))) = self.heap.peek() else {
            return;
        };
        let now = self.shared.clock.now();
        if due <= now + self.shared.send_window_ns {
            self.dispatch_due(now);
            if !self.sessions.is_empty() {
                self.flush_dirty();
            }
        }
    }

    pub(super) fn on_event(&mut self, ci: usize, flags: epoll::EventFlags) {
        let readable = flags.intersects(
            epoll::EventFlags::IN
                | epoll::EventFlags::RDHUP
                | epoll::EventFlags::HUP
                | epoll::EventFlags::ERR,
        );
        match self.conns[ci].phase {
            Phase::Closed => {}
            Phase::Connecting => {
                let Some(sock) = &self.conns[ci].sock else {
                    return;
                };
                match connect_result(sock) {
                    Ok(true) => {
                        let now = self.shared.clock.now();
                        self.connected(ci, now);
                    }
                    Ok(false) => {}
                    Err(e) => self.fail(ci, Failure::io(ErrorKind::Connect, e)),
                }
            }
            Phase::Idle => {
                if readable {
                    self.idle_event(ci);
                }
            }
            Phase::Handshaking | Phase::Active => {
                if flags.intersects(epoll::EventFlags::RDHUP | epoll::EventFlags::HUP) {
                    self.conns[ci].peer_closed = true;
                }
                let r = self.drive(ci, true);
                self.settle(ci, r);
            }
        }
    }
}
