"""Unit tests of scripts/gpu_report.py's parsing (and scripts/ptx_sweep.py's verdicts), on
hand-written SASS and ptxas logs, and of scripts/cuda_toolkit.py's library links and
libcuda stub on a fake toolkit; the standard library only (no venv, no tools, no GPU; the
stub's test needs a C compiler, as Rust's linking does).

    python3 -m unittest scripts/test_gpu_report.py
"""
import ctypes
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_toolkit  # noqa: E402
import gpu_report as g  # noqa: E402
import ptx_sweep  # noqa: E402

# nvdisasm -c: a prologue, a K loop (guarded back edge to a label) with ptxas's never-run
# padding and a NOP, then the epilogue and the self-branch after EXIT.
NVDISASM = """
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM80"
//--------------------- .text.k                  --------------------------
	.section	.text.k,"ax",@progbits
	.sectioninfo	@"SHI_REGISTERS=255"
        .global         k
        .type           k,@function
k:
.text.k:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/              @!P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0030*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0040*/                   LDSM.16.M88.4 R4, [R2] ;
        /*0050*/                   LDSM.16.MT88.4 R8, [R3] ;
        /*0060*/                   HMMA.16816.F32 R12, R4, R8, R12 ;
        /*0070*/                   HMMA.16816.F32 R16, R6, R10, R16 ;
        /*0080*/              @!PT LDS RZ, [RZ] ;
        /*0090*/                   LDGSTS.E.BYPASS.LTC128B.128 [R2+0x1000], [R20.64], P3 ;
        /*00a0*/                   LDGSTS.E.LTC128B [R2+0x2000], [R22.64] ;
        /*00b0*/                   NOP ;
        /*00c0*/                   SHFL.BFLY PT, R5, R4, 0x1, 0x1f ;
        /*00d0*/                   MUFU.EX2 R6, R6 ;
        /*00e0*/                   IADD3 R0, R0, 0x1, RZ ;
        /*00f0*/                   ISETP.GE.AND P0, PT, R0, c[0x0][0x170], PT ;
        /*0100*/              @!P0 BRA `(.L_x_1) ;
.L_x_0:
        /*0110*/                   STG.E.128 [R2.64], R12 ;
        /*0120*/                   EXIT ;
.L_x_2:
        /*0130*/                   BRA `(.L_x_2);
        /*0140*/                   NOP;
.L_x_3:
"""

# cuobjdump -sass of the same shape: hex branch targets and encoding lines.
CUOBJDUMP = """
	code for sm_90a
		Function : matmul_kernel
	.headerflags	@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;  /* 0x00000a00ff017b82 */
        /* 0x000fe40000000800 */
        /*0010*/                   WARPGROUP.ARRIVE ;  /* 0x0000000000007990 */
        /* 0x000fe20000000000 */
        /*0020*/                   HGMMA.64x256x16.F32 R24, gdesc[UR4], R24 ;  /* 0x0e000000041879f0 */
        /* 0x000fe20008000818 */
        /*0030*/                   HGMMA.64x256x16.F32 R24, gdesc[UR8], R24, gsb0 ;  /* 0x0 */
        /* 0x000fe20008000818 */
        /*0040*/                   LDG.E.128.CONSTANT R4, desc[UR6][R2.64] ;  /* 0x0 */
        /*0050*/                   STS.128 [R0], R4 ;  /* 0x0 */
        /*0060*/                   LDS.U16 R9, [R0+0x2] ;  /* 0x0 */
        /*0070*/               @P0 BRA 0x10 ;  /* 0xfffffff000007947 */
        /* 0x000fea000383ffff */
        /*0080*/                   EXIT ;  /* 0x000000000000794d */
        /*0090*/                   BRA 0x90;  /* 0xfffffff000007947 */
"""


def sass(lines, name="k"):
    """A listing of one function from `(addr, text)` and `label` entries."""
    out = [f".text.{name}:"]
    for item in lines:
        if isinstance(item, str):
            out.append(f"{item}:")
        else:
            out.append(f"        /*{item[0]:04x}*/                   {item[1]} ;")
    return "\n".join(out) + "\n"


class SassParsing(unittest.TestCase):
    def test_nvdisasm_instructions_labels_and_guards(self):
        fns = g.parse_sass(NVDISASM)
        self.assertEqual(list(fns), ["k"])
        insns = fns["k"]
        self.assertEqual(len(insns), 21)
        first_branch = insns[2]
        self.assertEqual((first_branch.pred, first_branch.base), ("@!P0", "BRA"))
        self.assertEqual(first_branch.target, 0x110)  # .L_x_0
        back = next(i for i in insns if i.addr == 0x100)
        self.assertEqual(back.target, 0x30)  # .L_x_1
        pad = next(i for i in insns if i.addr == 0x80)
        self.assertEqual((pad.pred, pad.opcode, pad.operands), ("@!PT", "LDS", "RZ, [RZ]"))
        ldgsts = next(i for i in insns if i.addr == 0x90)
        self.assertEqual((ldgsts.base, ldgsts.opcode), ("LDGSTS", "LDGSTS.E.BYPASS.LTC128B.128"))
        self.assertEqual(insns[-2].target, 0x130)  # the self-branch after EXIT

    def test_cuobjdump_hex_targets(self):
        fns = g.parse_sass(CUOBJDUMP)
        self.assertEqual(list(fns), ["matmul_kernel"])
        insns = fns["matmul_kernel"]
        self.assertEqual([i.addr for i in insns], list(range(0, 0xa0, 0x10)))
        self.assertEqual(insns[7].target, 0x10)
        self.assertEqual(insns[7].pred, "@P0")
        self.assertEqual(insns[9].target, 0x90)

    def test_uniform_predicate_operand_is_not_a_guard(self):
        insns = g.parse_sass(sass([(0, "HMMA.16816.F32 R0, R2, R4, R0"),
                                   (0x10, "BRA.U !UP0, `(.L_x_9)"), ".L_x_9",
                                   (0x20, "@!UP1 BRA `(.L_x_10)"), (0x30, "EXIT"), ".L_x_10",
                                   (0x40, "EXIT")]))["k"]
        self.assertEqual((insns[1].pred, insns[1].opcode, insns[1].target), (None, "BRA.U", 0x20))
        self.assertEqual((insns[2].pred, insns[2].target), ("@!UP1", 0x40))

    def test_several_functions_and_picking(self):
        text = sass([(0, "EXIT")], "helper") + sass([(0, "EXIT")], "k")
        fns = g.parse_sass(text)
        self.assertEqual(list(fns), ["helper", "k"])
        self.assertEqual(g.pick_function(fns), "k")
        self.assertEqual(g.pick_function(fns, entries=["helper"]), "helper")
        self.assertEqual(g.pick_function(fns, prefer="helper"), "helper")
        self.assertEqual(g.pick_function({"only": []}), "only")


class Loops(unittest.TestCase):
    def test_k_loop_histogram(self):
        insns = g.parse_sass(NVDISASM)["k"]
        loops = g.find_loops(insns)
        self.assertEqual([(l.start, l.end) for l in loops], [(0x30, 0x100), (0x130, 0x130)])
        stats = g.loop_stats(insns)
        self.assertEqual((stats["start"], stats["end"], stats["loops"], stats["nested"]),
                         (0x30, 0x100, 1, 0))
        # 14 instructions in [0x30, 0x100]: the NOP and the never-run LDS stand apart.
        self.assertEqual(stats["total"], 12)
        self.assertEqual(stats["nop"], 2)
        self.assertEqual(stats["classes"], {"HMMA": 2, "HGMMA": 0, "QGMMA": 0, "LDSM": 2,
                                            "LDGSTS": 2, "UTMALDG": 0, "SYNCS": 0,
                                            "LDS": 0, "STS": 0, "LDG": 0, "BAR": 1, "SHFL": 1,
                                            "MUFU": 1})
        self.assertEqual(stats["variants"], {
            "HMMA.16816.F32": 2, "LDSM.M88.4": 1, "LDSM.MT88.4": 1, "LDGSTS.128": 1,
            "LDGSTS.32": 1, "BAR.SYNC.DEFER_BLOCKING": 1, "SHFL.BFLY": 1, "MUFU.EX2": 1})
        self.assertEqual(stats["opcodes"]["BRA"], 1)

    def test_cuobjdump_hgmma_loop(self):
        stats = g.loop_stats(g.parse_sass(CUOBJDUMP)["matmul_kernel"])
        self.assertEqual((stats["start"], stats["end"]), (0x10, 0x70))
        self.assertEqual(stats["classes"]["HGMMA"], 2)
        self.assertEqual(stats["total"], 7)
        self.assertEqual(stats["variants"], {"HGMMA.64x256x16.F32": 2, "LDS.U16": 1,
                                             "STS.128": 1, "LDG.128": 1})

    def test_fp8_qgmma_loop_is_a_k_loop(self):
        # Hopper's fp8 `wgmma` assembles to QGMMA: its loop is the K loop too.
        insns = g.parse_sass(sass([
            (0x00, "MOV R0, RZ"), ".L_x_0",
            (0x10, "QGMMA.64x256x32.F32.E5M2.E5M2 R24, gdesc[UR4], R24, gsb0"),
            (0x20, "LDGSTS.E.BYPASS.128 [R3], desc[UR6][R4.64]"),
            (0x30, "@P0 BRA `(.L_x_0)"),
            (0x40, "EXIT")]))["k"]
        stats = g.loop_stats(insns)
        self.assertEqual((stats["start"], stats["end"], stats["total"]), (0x10, 0x30, 3))
        self.assertEqual(stats["classes"]["QGMMA"], 1)
        self.assertEqual(stats["variants"]["QGMMA.64x256x32.F32.E5M2.E5M2"], 1)

    def test_tma_loop_counts_its_copies_and_phase_waits(self):
        # A TMA K loop: UTMALDG copies, the mbarrier's phase wait (a SYNCS spin loop nested
        # in the K loop) and no LDGSTS.
        insns = g.parse_sass(sass([
            (0x00, "MOV R0, RZ"), ".L_x_0",
            (0x10, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R2+URZ+0x24000], R3"),
            (0x20, "@!P0 BRA `(.L_x_0)"),
            (0x30, "HGMMA.64x256x16.F32 R24, gdesc[UR4], R24, gsb0"),
            (0x40, "SYNCS.ARRIVE.TRANS64.A1T0 RZ, [R2+URZ+0x24008], RZ"),
            (0x50, "UTMALDG.2D [UR8], [UR10]"),
            (0x60, "@P1 BRA `(.L_x_0)"),
            (0x70, "EXIT")]))["k"]
        stats = g.loop_stats(insns)
        self.assertEqual((stats["start"], stats["end"]), (0x10, 0x60))
        self.assertEqual((stats["classes"]["UTMALDG"], stats["classes"]["SYNCS"]), (1, 2))
        self.assertEqual(stats["classes"]["LDGSTS"], 0)

    def test_wait_retry_stub_after_exit_is_no_loop(self):
        # ptxas puts a phase wait's retry loop after the last EXIT and jumps back from it:
        # that jump is no loop around the code before the EXIT, whose K loop is reported.
        insns = g.parse_sass(sass([
            (0x00, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR9], R2"),
            (0x10, "@!P0 BRA `(.L_x_2)"), ".L_x_3", ".L_x_0",
            (0x20, "HGMMA.64x64x16.F32 R24, gdesc[UR4], R24, gsb0"),
            (0x30, "@P1 BRA `(.L_x_0)"),
            (0x40, "EXIT"), ".L_x_2",
            (0x50, "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR9], R2"),
            (0x60, "@!P0 BRA `(.L_x_2)"),
            (0x70, "BRA `(.L_x_3)")]))["k"]
        stats = g.loop_stats(insns)
        self.assertEqual((stats["start"], stats["end"], stats["total"]), (0x20, 0x30, 2))
        self.assertEqual(len(g.find_loops(insns)), 2)

    def test_outermost_loop_with_nested_loop(self):
        insns = g.parse_sass(sass([
            (0x00, "MOV R0, RZ"), ".L_x_0",
            (0x10, "HMMA.16816.F32 R4, R8, R10, R4"), ".L_x_1",
            (0x20, "LDS R2, [R3]"),
            (0x30, "@P1 BRA `(.L_x_1)"),  # an inner loop without MMA
            (0x40, "HMMA.16816.F32 R4, R8, R10, R4"),
            (0x50, "@P0 BRA `(.L_x_0)"),
            (0x60, "EXIT")]))["k"]
        stats = g.loop_stats(insns)
        self.assertEqual((stats["start"], stats["end"]), (0x10, 0x50))
        self.assertEqual((stats["loops"], stats["nested"], stats["total"]), (1, 1, 5))
        self.assertEqual(stats["classes"]["HMMA"], 2)
        self.assertEqual(stats["classes"]["LDS"], 1)

    def test_outer_loop_without_mma_around_k_loop_is_the_k_loop_still(self):
        # The outermost loop holding an MMA, as defined: a persistent tile loop around the
        # K loop is the one reported, its inner K loop counted as nested.
        insns = g.parse_sass(sass([
            ".L_x_0", (0x00, "S2R R0, SR_CTAID.X"), ".L_x_1",
            (0x10, "HMMA.16816.F32 R4, R8, R10, R4"),
            (0x20, "@P1 BRA `(.L_x_1)"),
            (0x30, "STG.E [R2.64], R4"),
            (0x40, "@P0 BRA `(.L_x_0)"),
            (0x50, "EXIT")]))["k"]
        stats = g.loop_stats(insns)
        self.assertEqual((stats["start"], stats["end"], stats["nested"]), (0x00, 0x40, 1))

    def test_two_sibling_mma_loops_first_shown(self):
        insns = g.parse_sass(sass([
            ".L_x_0", (0x00, "HMMA.16816.F32 R4, R8, R10, R4"), (0x10, "@P0 BRA `(.L_x_0)"),
            ".L_x_1", (0x20, "HMMA.16816.F32 R4, R8, R10, R4"),
            (0x30, "FMNMX R1, R2, R3, !PT"), (0x40, "@P1 BRA `(.L_x_1)"),
            (0x50, "EXIT")]))["k"]
        stats = g.loop_stats(insns)
        self.assertEqual((stats["start"], stats["end"], stats["loops"]), (0x00, 0x10, 2))
        self.assertEqual([(l["start"], l["total"]) for l in stats["all"]], [(0, 2), (0x20, 3)])

    def test_two_back_edges_to_one_head(self):
        insns = g.parse_sass(sass([
            ".L_x_0", (0x00, "HMMA.16816.F32 R4, R8, R10, R4"), (0x10, "@P1 BRA `(.L_x_0)"),
            (0x20, "IADD3 R0, R0, 0x1, RZ"), (0x30, "@P0 BRA `(.L_x_0)"), (0x40, "EXIT")]))["k"]
        stats = g.loop_stats(insns)
        self.assertEqual((stats["start"], stats["end"], stats["loops"], stats["nested"]),
                         (0x00, 0x30, 1, 1))

    def test_no_mma_loop(self):
        insns = g.parse_sass(sass([
            ".L_x_0", (0x00, "LDG.E R0, [R2.64]"), (0x10, "MUFU.EX2 R0, R0"),
            (0x20, "@P0 BRA `(.L_x_0)"), (0x30, "HMMA.16816.F32 R4, R8, R10, R4"),
            (0x40, "EXIT")]))["k"]
        self.assertEqual(len(g.find_loops(insns)), 1)
        self.assertIsNone(g.loop_stats(insns))
        self.assertEqual(g.fmt_row({"key": "softmax/f32/1024/w4/s1", "side": "tritium",
                                    "target": "sm_80", "regs": 10, "spill_stores": 0,
                                    "spill_loads": 0, "stack_frame": 0, "cumulative_stack": 0,
                                    "shared": 0, "loop": None, "ptxas_warnings": []})[7:],
                         ["-"] * (len(g.HEAD) - 7))

    def test_forward_branch_is_not_a_loop(self):
        insns = g.parse_sass(sass([(0x00, "@P0 BRA `(.L_x_0)"),
                                   (0x10, "HMMA.16816.F32 R4, R8, R10, R4"), ".L_x_0",
                                   (0x20, "EXIT")]))["k"]
        self.assertEqual(g.find_loops(insns), [])


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
    208 bytes stack frame, 216 bytes spill stores, 204 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 208 bytes cumulative stack size, 384 bytes cmem[0]
ptxas warning : Registers are spilled to local memory in function 'k', 216 bytes spill stores, 204 bytes spill loads
ptxas warning : Local memory used for function 'k', size of stack frame: 208 bytes
ptxas info    : Compiling entry function 'small' for 'sm_80'
ptxas info    : Function properties for small
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 1024 bytes smem, 368 bytes cmem[0]
"""


class Ptxas(unittest.TestCase):
    def test_log(self):
        log = g.parse_ptxas_log(PTXAS_LOG)
        k = log["functions"]["k"]
        self.assertEqual((k["regs"], k["barriers"], k["stack_frame"], k["spill_stores"],
                          k["spill_loads"], k["cumulative_stack"], k["entry"]),
                         (255, 1, 208, 216, 204, 208, True))
        small = g.resources(log, "small")
        self.assertEqual((small["regs"], small["smem"], small["spill_stores"]), (12, 1024, 0))
        self.assertEqual(small["warnings"], [])
        self.assertEqual(len(g.resources(log, "k")["warnings"]), 2)
        self.assertTrue(all(g.is_spill_warning(w) for w in g.resources(log, "k")["warnings"]))

    def test_blackwell_prefix_and_errors(self):
        log = g.parse_ptxas_log(
            "ptxas-blackwell info    : Compiling entry function 'matmul_kernel' for 'sm_90a'\n"
            "ptxas-blackwell info    : Function properties for matmul_kernel\n"
            "    8 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
            "ptxas-blackwell info    : Used 255 registers, used 1 barriers, 8 bytes cumulative "
            "stack size\n"
            "ptxas /tmp/x.ptx, line 5; fatal   : Unsupported .version 9.4; current version is "
            "'9.0'\n"
            "ptxas fatal   : Ptx assembly aborted due to errors\n")
        r = g.resources(log, None)
        self.assertEqual((r["regs"], r["spill_stores"], r["spill_loads"], r["stack_frame"]),
                         (255, 8, 12, 8))
        self.assertEqual(log["errors"][0],
                         "Unsupported .version 9.4; current version is '9.0' (/tmp/x.ptx, line 5)")


class ManifestKeysGate(unittest.TestCase):
    def test_manifest(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "manifest.tsv"
            p.write_text("key\tsm\tnum_warps\tnum_stages\tshared_bytes\tptx\n"
                         "matmul/f16/128x256x64/w8/s3\t90a\t8\t3\t147456\tm.ptx\n\n")
            rows = g.read_manifest(p)
            self.assertEqual(rows, [{"key": "matmul/f16/128x256x64/w8/s3", "sm": "90a",
                                     "num_warps": 8, "num_stages": 3, "shared_bytes": 147456,
                                     "ptx": "m.ptx"}])
            p.write_text("key\tsm\tptx\n")
            with self.assertRaises(ValueError):
                g.read_manifest(p)

    def test_triton_specs(self):
        s = g.triton_spec("matmul/f16/128x256x64/w8/s3")
        self.assertEqual((s["fn"], s["num_warps"], s["num_stages"]), ("matmul_kernel", 8, 3))
        self.assertEqual(s["constexprs"], {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8,
                                           "stride_ak": 1, "stride_bn": 1, "stride_cn": 1})
        self.assertEqual(s["signature"]["a_ptr"], "*fp16")
        self.assertEqual(s["signature"]["stride_ak"], "constexpr")
        self.assertEqual(s["signature"]["K"], "i32")
        self.assertEqual(s["divisible_by_16"], sorted(
            ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_bk", "stride_cm"]))
        a = g.triton_spec("attention/f16/d64/128x64/w4/s3/causal")
        self.assertEqual(a["constexprs"], {"D": 64, "STAGE": 3, "BM": 128, "BN": 64})
        self.assertEqual(a["signature"]["sm_scale"], "fp32")
        self.assertEqual(a["signature"]["lse_ptr"], "*fp32")
        self.assertNotIn("sm_scale", a["divisible_by_16"])
        self.assertIn("n_ctx", a["divisible_by_16"])
        self.assertEqual(g.triton_spec("attention/f16/d128/128x64/w8/s3/full")["constexprs"]
                         ["STAGE"], 1)
        f8 = g.triton_spec("attention/fp8e5/d64/128x64/w4/s3/full")
        self.assertEqual(f8["fn"], "attn_fwd")
        self.assertEqual(f8["constexprs"], {"D": 64, "STAGE": 1, "BM": 128, "BN": 64})
        self.assertEqual([f8["signature"][k] for k in ["q_ptr", "v_ptr", "out_ptr"]],
                         ["*fp8e5"] * 3)
        t = g.triton_spec("attention_descriptor/f16/d64/128x64/w4/s3/causal")
        self.assertEqual(t["fn"], "attn_fwd_descriptor")
        self.assertEqual(list(t["signature"])[:8], ["q_ptr", "k_ptr", "v_ptr", "sm_scale",
                                                    "lse_ptr", "out_ptr", "Z_H", "n_ctx"])
        self.assertIn("Z_H", t["divisible_by_16"])
        self.assertIsNone(g.triton_spec("vector_add/f32/1024/w4/s1"))
        self.assertIsNone(g.triton_spec("matmul/f32/128x128x32/w4/s4"))
        self.assertEqual(g.triton_targets("80"), [g.SM80])
        self.assertEqual(g.triton_targets("90a"), [g.SM90_MMA, g.SM90_WGMMA])

    def test_gate(self):
        clean = {"side": "tritium", "key": "a", "target": "sm_80", "error": None,
                 "spill_stores": 0, "spill_loads": 0, "stack_frame": 0, "cumulative_stack": 0,
                 "ptxas_warnings": []}
        self.assertEqual(g.gate_failures([clean]), [])
        spills = dict(clean, key="b", spill_stores=8, spill_loads=4, stack_frame=8)
        warned = dict(clean, key="c", ptxas_warnings=["Local memory used for function 'k'"])
        failed = dict(clean, key="d", error="RuntimeError: ptxas: bad")
        triton = dict(spills, side="triton")
        serialized = dict(clean, key="e", ptxas_warnings=[
            "(C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized"])
        bad = g.gate_failures([clean, spills, warned, failed, triton, serialized])
        self.assertEqual(len(bad), 4)
        self.assertIn("b (sm_80", bad[0])
        self.assertIn("spills 8+4 bytes; stack 8 bytes", bad[0])
        self.assertIn("c (sm_80", bad[1])
        self.assertIn("d (sm_80", bad[2])
        self.assertIn("C7515", bad[3])

    def test_wgmma_notes_are_warnings(self):
        log = g.parse_ptxas_log(
            "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions "
            "are serialized due to non wgmma instructions defining accumulator registers of a "
            "wgmma between start and end of the pipeline stage in the function 'k'\n"
            "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n")
        self.assertEqual([w["function"] for w in log["warnings"]], ["k"])
        self.assertTrue(g.is_wgmma_note(log["warnings"][0]["text"]))

    def test_kib(self):
        self.assertEqual([g.kib(n) for n in [0, 512, 98304, 102912, None]],
                         ["0", "512B", "96K", "100.5K", "?"])


class PtxSweep(unittest.TestCase):
    def test_arch_of_a_swept_file(self):
        self.assertEqual([ptx_sweep.arch_of(p) for p in [
            "d/tritium_matmul_0123456789abcdef.sm_80.ptx",
            "tritium_k_0123456789abcdef.sm_90.ptx"]], ["sm_80", "sm_90a"])

    def test_verdicts(self):
        # A clean kernel; one that spills (named once, from its numbers); a wgmma note; a
        # fatal error; a failure without a message.
        clean = PTXAS_LOG.split("ptxas info    : Compiling entry function 'small'")[1]
        self.assertEqual(ptx_sweep.verdict(0, "ptxas info    : Compiling entry function 'small'"
                                              + clean), ([], []))
        errors, warnings = ptx_sweep.verdict(0, PTXAS_LOG)
        self.assertEqual(errors, [])
        self.assertEqual(warnings, ["k: 208 bytes stack frame, 216+204 bytes spilled"])
        _, warnings = ptx_sweep.verdict(0, "ptxas info    : (C7510) Potential Performance Loss: "
                                           "wgmma.mma_async instructions are serialized in the "
                                           "function 'k'\n")
        self.assertEqual(len(warnings), 1)
        self.assertTrue(g.is_wgmma_note(warnings[0]))
        # A printing kernel's stack frame and serialized wgmma are printf's, not warnings;
        # its spills are.
        frame = ("ptxas info    : Compiling entry function 'p' for 'sm_90a'\n"
                 "ptxas info    : Function properties for p\n"
                 "    24 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                 "ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async "
                 "instructions are serialized due to wgmma pipeline crossing function boundary "
                 "at a function call in the function 'p'\n")
        self.assertEqual(ptx_sweep.verdict(0, frame, prints=True), ([], []))
        self.assertEqual(len(ptx_sweep.verdict(0, frame)[1]), 2)
        self.assertEqual(len(ptx_sweep.verdict(0, PTXAS_LOG, prints=True)[1]), 1)
        errors, _ = ptx_sweep.verdict(255, "ptxas /tmp/x.ptx, line 9; error   : Arguments "
                                           "mismatch for instruction 'mma'\n")
        self.assertEqual(errors, ["Arguments mismatch for instruction 'mma' (/tmp/x.ptx, line 9)"])
        errors, _ = ptx_sweep.verdict(139, "")
        self.assertEqual(errors, ["ptxas exited with 139: "])


if __name__ == "__main__":
    unittest.main()


class CudaToolkit(unittest.TestCase):
    """scripts/cuda_toolkit.py on a fake toolkit root: what the linker finds."""

    def test_each_versioned_library_gets_the_name_the_linker_looks_for(self):
        with tempfile.TemporaryDirectory() as d:
            lib = Path(d)
            for name in ["libcublas.so.13", "libcurand.so.10", "libnvrtc-builtins.so.13.0"]:
                (lib / name).write_bytes(b"")
            cuda_toolkit.link_names(lib)
            cuda_toolkit.link_names(lib)  # again: links already there are kept
            self.assertEqual(os.readlink(lib / "libcublas.so"), "libcublas.so.13")
            self.assertEqual(os.readlink(lib / "libcurand.so"), "libcurand.so.10")
            # Only `libX.so.N` names: a builtins library with a dash and two numbers is not
            # one a build links by `-l`.
            self.assertFalse((lib / "libnvrtc-builtins.so").exists())

    @unittest.skipUnless(shutil.which("cc"), "needs a C compiler")
    def test_the_libcuda_stub_defines_every_driver_name_under_the_drivers_soname(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "include").mkdir()
            (root / "lib").mkdir()
            (root / "include" / "cuda.h").write_text(
                "#define cuCtxCreate cuCtxCreate_v4\n"
                "CUresult CUDAAPI cuInit(unsigned int Flags);\n"
                "CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx);\n")
            cuda_toolkit.libcuda_stub(root)
            stub = root / "lib" / "stubs" / "libcuda.so"
            self.assertIn(b"libcuda.so.1", stub.read_bytes())
            loaded = ctypes.CDLL(str(stub))
            for name in ["cuInit", "cuCtxCreate", "cuCtxCreate_v4"]:
                self.assertTrue(hasattr(loaded, name), name)
            # Names that are types or macros' arguments only are harmless extras; nothing
            # lowercase after `cu` is taken.
            self.assertFalse(hasattr(loaded, "cudaMalloc"))
