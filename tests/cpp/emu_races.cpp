// Scenario driver for tests/test_emu_pipes.py: `emu_races NAME` runs one tiny kernel on the emulation and prints
// the launch report (emu::PrintReport). Each scenario exercises one rule of the race detector (emu/pipes.h,
// docs/reference/ascendc.md §1.6); a `// @tag` comment marks a statement the test expects a fault to name by line.
#include <cstdio>
#include <string>
#include <vector>

#include "kernel_operator.h"
#include "emu/launch.h"

using namespace AscendC;
static constexpr uint64_t kUb = 196608;

int main(int argc, char** argv)
{
    const std::string s = argc > 1 ? argv[1] : "";
    std::vector<float> x(1024), y(1024, 0.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
    std::vector<half> xh(64 * 64, half(1.0f));
    emu::RegisterGm(x.data(), x.size() * 4, "x");
    emu::RegisterGm(y.data(), y.size() * 4, "y");
    emu::RegisterGm(xh.data(), xh.size() * 2, "xh");
    emu::LaunchResult r;
    bool known = true;

    auto vec = [&](const std::function<void(TPipe&, GlobalTensor<float>&, GlobalTensor<float>&)>& body) {
        r = emu::Launch(1, kUb, [&] {
            TPipe pipe;
            GlobalTensor<float> gx, gy;
            gx.SetGlobalBuffer(x.data(), 1024);
            gy.SetGlobalBuffer(y.data(), 1024);
            body(pipe, gx, gy);
        });
    };

    // ------------------------------------------------------------ within PIPE_V
    if (s == "v_dep_nobarrier" || s == "v_dep_barrier") {
        const bool barrier = s == "v_dep_barrier";
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 2048);
            LocalTensor<float> t = b.Get<float>();
            Duplicate(t, 1.0f, 256);  // @dup
            if (barrier) PipeBarrier<PIPE_V>();
            Adds(t[256], t, 2.0f, 256);  // @adds
        });
    } else if (s == "reduce_tmp_nobarrier") {
        // ReduceSum writes its per-repeat partial sums into tmp: a later vector write of tmp must wait for it.
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 8192);
            LocalTensor<float> src = b.Get<float>(), dst = src[1024], tmp = src[1088];
            Duplicate(src, 1.0f, 1024);
            PipeBarrier<PIPE_V>();
            ReduceSum(dst, src, tmp, 1024);  // @reduce
            Duplicate(tmp, 5.0f, 64);  // @duptmp
        });
    } else if (s == "v_war_nobarrier") {
        // Mul reads a, then Muls overwrites a: write-after-read inside PIPE_V needs a barrier too.
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 3072);
            LocalTensor<float> a = b.Get<float>(), c = a[256], d = a[512];
            Duplicate(a, 1.0f, 256);
            Duplicate(c, 2.0f, 256);
            PipeBarrier<PIPE_V>();
            Mul(d, a, c, 256);  // @mul
            Duplicate(a, 3.0f, 256);  // @dup2
        });
    } else if (s == "v_war_inplace" || s == "v_war_inplace_barrier") {
        // Mul reads a, then an in-place Adds reads and writes a: its own read is no race with its write, but Mul's
        // read before it is (the write-after-read needs a barrier although the latest read of a is Adds' own).
        const bool barrier = s == "v_war_inplace_barrier";
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 3072);
            LocalTensor<float> a = b.Get<float>(), c = a[256], d = a[512];
            Duplicate(a, 1.0f, 256);
            Duplicate(c, 2.0f, 256);
            PipeBarrier<PIPE_V>();
            Mul(d, a, c, 256);  // @mul
            if (barrier) PipeBarrier<PIPE_V>();
            Adds(a, a, 1.0f, 256);  // @adds
        });
    } else if (s == "v_inplace") {
        // One instruction reading and writing the same blocks is no race (dst == src, docs/reference/ascendc.md §1.9).
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            Duplicate(t, 1.0f, 256);
            PipeBarrier<PIPE_V>();
            Adds(t, t, 1.0f, 256);
        });

    // ------------------------------------------------------------ copy-in through a TBuf (no queue, no sync)
    } else if (s == "tbuf_copyin_noflag" || s == "tbuf_copyin_flag") {
        const bool flag = s == "tbuf_copyin_flag";
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>& gy) {
            TBuf<> b; pipe.InitBuffer(b, 2048);
            LocalTensor<float> t = b.Get<float>();
            DataCopy(t, gx, 256);  // @copyin
            if (flag) { SetFlag<HardEvent::MTE2_V>(EVENT_ID0); WaitFlag<HardEvent::MTE2_V>(EVENT_ID0); }
            Muls(t[256], t, 2.0f, 256);  // @muls
            if (flag) { SetFlag<HardEvent::V_MTE3>(EVENT_ID1); WaitFlag<HardEvent::V_MTE3>(EVENT_ID1); }
            if (flag) DataCopy(gy, t[256], 256);
        });
    } else if (s == "v_mte3_noflag") {
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>& gy) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            Duplicate(t, 4.0f, 256);  // @dup
            DataCopy(gy, t, 256);  // @copyout
        });
    } else if (s == "scalar_wait_orders_later") {
        // WaitFlag<MTE2_S> stops the scalar unit, so nothing later is issued before the copy completed: the vector
        // read after it is ordered without an MTE2_V flag (emu/pipes.h).
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 2048);
            LocalTensor<float> t = b.Get<float>();
            DataCopy(t, gx, 256);
            SetFlag<HardEvent::MTE2_S>(EVENT_ID0); WaitFlag<HardEvent::MTE2_S>(EVENT_ID0);
            (void)t.GetValue(3);
            Muls(t[256], t, 2.0f, 256);
        });
    } else if (s == "pipe_all") {
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>& gy) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            DataCopy(t, gx, 256);
            PipeBarrier<PIPE_ALL>();
            Adds(t, t, 1.0f, 256);
            PipeBarrier<PIPE_ALL>();
            DataCopy(gy, t, 256);
        });
    } else if (s == "mte2_in_order") {
        // Two copies into the same blocks on one MTE pipe complete in issue order (EMU.md "Pipes and races").
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            DataCopy(t, gx, 256);
            DataCopy(t, gx[256], 256);
        });
    } else if (s == "waw_v_mte2") {
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            Duplicate(t, 0.0f, 256);  // @dup
            DataCopy(t, gx, 256);  // @copyin
        });

    // ------------------------------------------------------------ queue hand-offs
    } else if (s == "queue_pipeline") {
        // The add_example shape (docs/reference/ascendc.md §1.5): VECIN and VECOUT queues, two buffers each, eight
        // tiles; EnQue/DeQue and FreeTensor/AllocTensor carry every hand-off, no flag or barrier is written.
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>& gy) {
            TQue<QuePosition::VECIN, 1> qi; TQue<QuePosition::VECOUT, 1> qo;
            pipe.InitBuffer(qi, 2, 128 * 4); pipe.InitBuffer(qo, 2, 128 * 4);
            for (int tile = 0; tile < 8; ++tile) {
                LocalTensor<float> a = qi.AllocTensor<float>();
                DataCopy(a, gx[tile * 128], 128);
                qi.EnQue(a);
                a = qi.DeQue<float>();
                LocalTensor<float> o = qo.AllocTensor<float>();
                Muls(o, a, 2.0f, 128);
                qo.EnQue(o);
                qi.FreeTensor(a);
                o = qo.DeQue<float>();
                DataCopy(gy[tile * 128], o, 128);
                qo.FreeTensor(o);
            }
        });
    } else if (s == "queue_bind") {
        // TQueBind<VECIN, VECOUT>: copied in by MTE2, copied out by MTE3 without a vector stage.
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>& gy) {
            TQueBind<TPosition::VECIN, TPosition::VECOUT, 1> q; pipe.InitBuffer(q, 1, 1024);
            for (int tile = 0; tile < 3; ++tile) {
                LocalTensor<float> a = q.AllocTensor<float>();
                DataCopy(a, gx[tile * 256], 256);
                q.EnQue(a);
                a = q.DeQue<float>();
                DataCopy(gy[tile * 256], a, 256);
                q.FreeTensor(a);
            }
        });
    } else if (s == "queue_scalar_write") {
        // A VECOUT queue hands V's work to MTE3, not the scalar unit's: SetValue then EnQue still races.
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>& gy) {
            TQue<QuePosition::VECOUT, 1> qo; pipe.InitBuffer(qo, 1, 256);
            LocalTensor<float> o = qo.AllocTensor<float>();
            for (int i = 0; i < 8; ++i) o.SetValue(i, float(i));  // @setvalue
            qo.EnQue(o);
            o = qo.DeQue<float>();
            DataCopy(gy, o, 8);  // @copyout
            qo.FreeTensor(o);
        });

    // ------------------------------------------------------------ the scalar unit
    } else if (s == "v_s_noflag" || s == "v_s_flag") {
        const bool flag = s == "v_s_flag";
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            Duplicate(t, 5.0f, 64);  // @dup
            if (flag) { SetFlag<HardEvent::V_S>(EVENT_ID2); WaitFlag<HardEvent::V_S>(EVENT_ID2); }
            std::printf("val v %g\n", t.GetValue(7));  // @getvalue
        });
    } else if (s == "s_v_noflag") {
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            t.SetValue(0, 1.0f);  // @setvalue
            Adds(t[64], t, 1.0f, 8);  // @adds
        });
    } else if (s == "s_read_then_v_write") {
        // Scalar reads are synchronous: a vector write after a GetValue needs no flag (emu/pipes.h).
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            t.SetValue(0, 1.0f);
            SetFlag<HardEvent::S_V>(EVENT_ID0); WaitFlag<HardEvent::S_V>(EVENT_ID0);
            Adds(t[64], t, 1.0f, 8);
            SetFlag<HardEvent::V_S>(EVENT_ID0); WaitFlag<HardEvent::V_S>(EVENT_ID0);
            (void)t.GetValue(64);
            Duplicate(t[64], 0.0f, 8);
        });

    // ------------------------------------------------------------ write-after-read across pipes
    } else if (s == "war_mte3_v" || s == "war_mte3_v_flag") {
        // MTE3 still reads the tile out while V overwrites it (the next tile of a TBuf-staged output).
        const bool flag = s == "war_mte3_v_flag";
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>& gy) {
            TBuf<> b; pipe.InitBuffer(b, 1024);
            LocalTensor<float> t = b.Get<float>();
            for (int tile = 0; tile < 2; ++tile) {
                PipeBarrier<PIPE_V>();   // orders the two Duplicates: only MTE3's read of tile 0 is left
                if (tile > 0 && flag) { SetFlag<HardEvent::MTE3_V>(EVENT_ID0); WaitFlag<HardEvent::MTE3_V>(EVENT_ID0); }
                Duplicate(t, float(tile), 256);  // @dup
                SetFlag<HardEvent::V_MTE3>(EVENT_ID0); WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
                DataCopy(gy[tile * 256], t, 256);  // @copyout
            }
        });

    // ------------------------------------------------------------ GM hazards inside one core
    } else if (s == "gm_raw_mte3_mte2" || s == "gm_raw_mte3_mte2_flag" || s == "gm_raw_pipe_all" ||
               s == "gm_disjoint") {
        // A tile stored to GM by MTE3 and loaded back by MTE2 (a workspace round trip): the reload must wait for
        // the store (MTE3_MTE2, or a PIPE_ALL barrier); a load of other GM blocks needs nothing.
        vec([&](TPipe& pipe, GlobalTensor<float>&, GlobalTensor<float>& gy) {
            TBuf<> b; pipe.InitBuffer(b, 2048);
            LocalTensor<float> t = b.Get<float>(), u = t[256];
            Duplicate(t, 3.0f, 256);
            SetFlag<HardEvent::V_MTE3>(EVENT_ID0); WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
            DataCopy(gy, t, 256);  // @store
            if (s == "gm_raw_mte3_mte2_flag") {
                SetFlag<HardEvent::MTE3_MTE2>(EVENT_ID0); WaitFlag<HardEvent::MTE3_MTE2>(EVENT_ID0);
            }
            if (s == "gm_raw_pipe_all") PipeBarrier<PIPE_ALL>();
            DataCopy(u, gy[s == "gm_disjoint" ? 256 : 0], 256);  // @reload
            SetFlag<HardEvent::MTE2_S>(EVENT_ID0); WaitFlag<HardEvent::MTE2_S>(EVENT_ID0);
            if (s != "gm_disjoint") std::printf("val u %g\n", u.GetValue(5));
        });
    } else if (s == "gm_war_mte2_mte3" || s == "gm_war_chain") {
        // MTE2 loads x, then MTE3 overwrites the same x bytes: the store must wait for the load (MTE2_MTE3). With
        // the stored tile computed from the loaded one, MTE2_V and V_MTE3 order them already (transitively).
        const bool chain = s == "gm_war_chain";
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>&) {
            TBuf<> b; pipe.InitBuffer(b, 2048);
            LocalTensor<float> t = b.Get<float>(), u = t[256];
            DataCopy(t, gx, 256);  // @load
            if (chain) { SetFlag<HardEvent::MTE2_V>(EVENT_ID0); WaitFlag<HardEvent::MTE2_V>(EVENT_ID0); }
            if (chain) Muls(u, t, 2.0f, 256); else Duplicate(u, 2.0f, 256);
            SetFlag<HardEvent::V_MTE3>(EVENT_ID0); WaitFlag<HardEvent::V_MTE3>(EVENT_ID0);
            DataCopy(gx, u, 256);  // @store
        });

    // ------------------------------------------------------------ flag pairing
    } else if (s == "wait_without_set") {
        vec([&](TPipe&, GlobalTensor<float>&, GlobalTensor<float>&) {
            WaitFlag<HardEvent::MTE2_V>(EVENT_ID3);  // @wait
        });
    } else if (s == "set_unconsumed") {
        vec([&](TPipe&, GlobalTensor<float>&, GlobalTensor<float>&) {
            SetFlag<HardEvent::V_MTE3>(EVENT_ID4);  // @set
        });
    } else if (s == "set_twice") {
        vec([&](TPipe&, GlobalTensor<float>&, GlobalTensor<float>&) {
            SetFlag<HardEvent::S_V>(EVENT_ID5);  // @set1
            SetFlag<HardEvent::S_V>(EVENT_ID5);  // @set2
            WaitFlag<HardEvent::S_V>(EVENT_ID5);
        });

    // ------------------------------------------------------------ the TPipe's event-id pool
    } else if (s == "pool_queue_holds_id" || s == "pool_fetch" || s == "pool_alloc" || s == "pool_set_then_queue" ||
               s == "pool_release_unalloc") {
        // A VECIN queue's EnQue takes the lowest free MTE2_V id of the pool (0) until its DeQue; a fixed
        // SetFlag<MTE2_V>(0) then is lost on the device; FetchEventID returns the next free id (1) and takes
        // nothing; AllocEventID takes one until ReleaseEventID.
        int fetched = -1, alloc0 = -1, alloc1 = -1;
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>&) {
            TQue<QuePosition::VECIN, 1> qi; pipe.InitBuffer(qi, 1, 256);
            LocalTensor<float> a = qi.AllocTensor<float>();
            DataCopy(a, gx, 64);
            if (s == "pool_set_then_queue") SetFlag<HardEvent::MTE2_V>(EVENT_ID0);  // @setfirst
            if (s == "pool_alloc") alloc0 = GetTPipePtr()->AllocEventID<HardEvent::MTE2_V>();
            qi.EnQue(a);  // @enque
            if (s == "pool_queue_holds_id") {
                SetFlag<HardEvent::MTE2_V>(EVENT_ID0);  // @set
                WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);
            } else if (s == "pool_fetch") {
                event_t e = static_cast<event_t>(GetTPipePtr()->FetchEventID(HardEvent::MTE2_V));
                fetched = e;
                SetFlag<HardEvent::MTE2_V>(e);
                WaitFlag<HardEvent::MTE2_V>(e);
            } else if (s == "pool_alloc") {
                alloc1 = GetTPipePtr()->AllocEventID<HardEvent::MTE2_V>();
                SetFlag<HardEvent::MTE2_V>(alloc1);
                WaitFlag<HardEvent::MTE2_V>(alloc1);
                GetTPipePtr()->ReleaseEventID<HardEvent::MTE2_V>(alloc1);
                GetTPipePtr()->ReleaseEventID<HardEvent::MTE2_V>(alloc0);
            } else if (s == "pool_release_unalloc") {
                GetTPipePtr()->ReleaseEventID<HardEvent::MTE2_V>(3);  // @release
            }
            if (s == "pool_set_then_queue") WaitFlag<HardEvent::MTE2_V>(EVENT_ID0);
            a = qi.DeQue<float>();
            qi.FreeTensor(a);
        });
        std::printf("val ids %d %d %d\n", fetched, alloc0, alloc1);
    } else if (s == "pool_exhausted") {
        // Three VECIN queues of three buffers: every buffer allocated, handed to V and freed, none allocated again;
        // each FreeTensor holds a V_MTE2 id of the pool until the buffer's next AllocTensor, so the ninth finds
        // all 8 held.
        vec([&](TPipe& pipe, GlobalTensor<float>& gx, GlobalTensor<float>&) {
            TQue<QuePosition::VECIN, 1> q[3];
            for (auto& qi : q) {
                pipe.InitBuffer(qi, 3, 256);
                LocalTensor<float> t[3];
                for (auto& tj : t) {
                    tj = qi.AllocTensor<float>();
                    DataCopy(tj, gx, 64);
                }
                for (auto& tj : t) {
                    qi.EnQue(tj);
                    tj = qi.DeQue<float>();
                }
                for (auto& tj : t) qi.FreeTensor(tj);
            }
        });
    } else if (s == "syncall_barrier") {
        // SyncAll is a full in-core barrier too (EMU.md "Pipes and races").
        r = emu::Launch(2, kUb, [&] {
            TPipe pipe; TBuf<> b; pipe.InitBuffer(b, 1024);
            GlobalTensor<float> gy; gy.SetGlobalBuffer(y.data() + 256 * GetBlockIdx(), 256);
            LocalTensor<float> t = b.Get<float>();
            Duplicate(t, 1.0f, 256);
            SyncAll();
            DataCopy(gy, t, 256);
        });

    // ------------------------------------------------------------ cube: MTE2 -> MTE1 -> M -> FIX
    } else if (s == "cube_ok" || s == "cube_no_mte1_m" || s == "cube_no_m_fix" || s == "cube_no_mte2_mte1") {
        std::vector<float> c(16 * 16, 0.0f);
        emu::RegisterGm(c.data(), c.size() * 4, "c");
        const bool mte2Mte1 = s != "cube_no_mte2_mte1", mte1M = s != "cube_no_mte1_m", mFix = s != "cube_no_m_fix";
        r = emu::LaunchCube(1, emu::CoreMem::Ascend910B(), [&] {
            TPipe pipe;
            TBuf<TPosition::A1> a1; TBuf<TPosition::B1> b1; TBuf<TPosition::A2> a2; TBuf<TPosition::B2> b2;
            TBuf<TPosition::CO1> c1;
            pipe.InitBuffer(a1, 512); pipe.InitBuffer(b1, 512); pipe.InitBuffer(a2, 512); pipe.InitBuffer(b2, 512);
            pipe.InitBuffer(c1, 1024);
            GlobalTensor<half> g; g.SetGlobalBuffer(xh.data(), xh.size());
            GlobalTensor<float> gc; gc.SetGlobalBuffer(c.data(), c.size());
            LocalTensor<half> l1a = a1.Get<half>(), l1b = b1.Get<half>(), l0a = a2.Get<half>(), l0b = b2.Get<half>();
            LocalTensor<float> l0c = c1.Get<float>();
            DataCopy(l1a, g, Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0));  // @nd2nz
            DataCopy(l1b, g, Nd2NzParams(1, 16, 16, 0, 16, 16, 1, 0));
            if (mte2Mte1) { SetFlag<HardEvent::MTE2_MTE1>(EVENT_ID0); WaitFlag<HardEvent::MTE2_MTE1>(EVENT_ID0); }
            LoadData(l0a, l1a, LoadData2DParams(0, 1, 1, 0, 0, false, 0));  // @loada
            LoadData(l0b, l1b, LoadData2DParams(0, 1, 1, 0, 0, true, 0));
            if (mte1M) { SetFlag<HardEvent::MTE1_M>(EVENT_ID0); WaitFlag<HardEvent::MTE1_M>(EVENT_ID0); }
            Mmad(l0c, l0a, l0b, MmadParams(16, 16, 16, 0, false, true));  // @mmad
            if (mFix) { SetFlag<HardEvent::M_FIX>(EVENT_ID0); WaitFlag<HardEvent::M_FIX>(EVENT_ID0); }
            Fixpipe<float, float, CFG_ROW_MAJOR>(gc, l0c, FixpipeParamsV220(16, 16, 16, 16, false));  // @fixpipe
        });
        if (r.ok) std::printf("val c0 %g\n", double(c[0]));
    } else {
        known = false;
    }
    if (!known) {
        std::fprintf(stderr, "unknown scenario %s\n", s.c_str());
        return 2;
    }
    emu::PrintReport(r);
    return 0;
}
