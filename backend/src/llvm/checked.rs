//! Checked mode's bounds compare and fault record (see `launch/checked.rs`), shared by both
//! generators; where the ranges and the record live differs per target.

use super::Emit;
use crate::launch::checked::LIST_WORDS;
use crate::llvm::Result;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::{AtomicOrdering, IntPredicate};
use tritium_dsl::ir::{BuiltinExtent, Value};

impl<'ctx> Emit<'_, 'ctx> {
    /// Checked mode's `p + off` elements of `elem_bytes` bytes: the address when the byte
    /// offset and the sum fit in i64, else the invalid address 2^63, which no buffer holds
    /// and which every later `addptr` keeps (an address past 2^63 stays there). So an
    /// offset that would wrap around the address space back onto a buffer (`x + 2^62`
    /// f32 elements is `x` again modulo 2^64) faults at its access instead.
    pub(crate) fn checked_offset(
        &self,
        p: PointerValue<'ctx>,
        off: IntValue<'ctx>,
        elem_bytes: usize,
    ) -> Result<PointerValue<'ctx>> {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let addr = b.build_ptr_to_int(p, i64t, "")?;
        let size = i64t.const_int(elem_bytes as u64, false);
        let field =
            |pair: inkwell::values::BasicValueEnum<'ctx>, k: u32| -> Result<IntValue<'ctx>> {
                Ok(b.build_extract_value(pair.into_struct_value(), k, "")?
                    .into_int_value())
            };
        let bytes = self.intrinsic(
            "llvm.smul.with.overflow",
            &[i64t.into()],
            &[off.into(), size.into()],
        )?;
        let sum = self.intrinsic(
            "llvm.sadd.with.overflow",
            &[i64t.into()],
            &[addr.into(), field(bytes, 0)?.into()],
        )?;
        let zero = i64t.const_zero();
        let invalid_in = b.build_int_compare(IntPredicate::SLT, addr, zero, "")?;
        let invalid_out = b.build_int_compare(IntPredicate::SLT, field(sum, 0)?, zero, "")?;
        let overflow = b.build_or(field(bytes, 1)?, field(sum, 1)?, "")?;
        let bad = b.build_or(
            overflow,
            b.build_or(invalid_in, invalid_out, "")?,
            "wrapped",
        )?;
        let invalid = i64t.const_int(1 << 63, false);
        let out = b
            .build_select(bad, invalid, field(sum, 0)?, "")?
            .into_int_value();
        Ok(b.build_int_to_ptr(out, p.get_type(), "checked.ptr")?)
    }

    /// The bytes builtin extent `extent` may touch from pointer `p` (elements of
    /// `elem_bytes`), as `(start, len)`: `len` is 0 when it touches none; an extent whose
    /// ends leave i64 starts at 2^63, which no buffer holds. `value` gives the call's
    /// scalar inputs (i64). The same elements as `BuiltinExtent::elements`.
    pub(crate) fn builtin_extent(
        &self,
        p: PointerValue<'ctx>,
        extent: &BuiltinExtent,
        value: impl Fn(Value) -> Result<IntValue<'ctx>>,
        elem_bytes: usize,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>)> {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let zero = i64t.const_zero();
        let field =
            |pair: inkwell::values::BasicValueEnum<'ctx>, k: u32| -> Result<IntValue<'ctx>> {
                Ok(b.build_extract_value(pair.into_struct_value(), k, "")?
                    .into_int_value())
            };
        let (lo, hi, touches, overflow) = match *extent {
            BuiltinExtent::Prefix { bound } => {
                let n = value(bound)?;
                let touches = b.build_int_compare(IntPredicate::SGT, n, zero, "")?;
                (zero, n, touches, self.ctx.bool_type().const_zero())
            }
            BuiltinExtent::Rows {
                stride,
                rows,
                row_len,
            } => {
                let (stride, rows) = (value(stride)?, value(rows)?);
                let some = b.build_int_compare(IntPredicate::SGT, rows, zero, "")?;
                let touches = match row_len {
                    0 => self.ctx.bool_type().const_zero(),
                    _ => some,
                };
                let before = b.build_int_sub(rows, i64t.const_int(1, false), "")?;
                let last = self.intrinsic(
                    "llvm.smul.with.overflow",
                    &[i64t.into()],
                    &[before.into(), stride.into()],
                )?;
                let (last, o1) = (field(last, 0)?, field(last, 1)?);
                let neg = b.build_int_compare(IntPredicate::SLT, last, zero, "")?;
                let lo = b.build_select(neg, last, zero, "")?.into_int_value();
                let top = b.build_select(neg, zero, last, "")?.into_int_value();
                let end = self.intrinsic(
                    "llvm.sadd.with.overflow",
                    &[i64t.into()],
                    &[top.into(), i64t.const_int(row_len, false).into()],
                )?;
                let (hi, o2) = (field(end, 0)?, field(end, 1)?);
                (lo, hi, touches, b.build_or(o1, o2, "")?)
            }
        };
        let start = self.checked_offset(p, lo, elem_bytes)?;
        let end = self.checked_offset(p, hi, elem_bytes)?;
        let start = b.build_ptr_to_int(start, i64t, "")?;
        let end = b.build_ptr_to_int(end, i64t, "")?;
        let invalid = i64t.const_int(1 << 63, false);
        let start = b
            .build_select(overflow, invalid, start, "")?
            .into_int_value();
        let len = b.build_int_sub(end, start, "")?;
        let len = b
            .build_select(touches, len, zero, "extent")?
            .into_int_value();
        Ok((start, len))
    }

    /// The address a fault of builtin extent `[start, start + len)` (elements of
    /// `elem_bytes`) reports: the first element outside a buffer, its start unless
    /// `start_inside`, else its last element.
    pub(crate) fn extent_fault_address(
        &self,
        start: IntValue<'ctx>,
        len: IntValue<'ctx>,
        elem_bytes: usize,
        start_inside: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let b = self.b;
        let end = b.build_int_add(start, len, "")?;
        let elem = self.ctx.i64_type().const_int(elem_bytes as u64, false);
        let last = b.build_int_sub(end, elem, "")?;
        Ok(b.build_select(start_inside, last, start, "")?
            .into_int_value())
    }

    /// i1: `[addr, addr + size)` lies inside `[lo, hi)` (i64 byte addresses). Compared as
    /// `lo <= addr <= hi && hi - addr >= size` so that an address within `size` bytes of
    /// 2^64 does not wrap its end around to a small, "inside" value.
    fn in_range(
        &self,
        addr: IntValue<'ctx>,
        size: IntValue<'ctx>,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let b = self.b;
        let above = b.build_int_compare(IntPredicate::UGE, addr, lo, "")?;
        let below = b.build_int_compare(IntPredicate::ULE, addr, hi, "")?;
        let room = b.build_int_sub(hi, addr, "")?;
        let fits = b.build_int_compare(IntPredicate::UGE, room, size, "")?;
        let ok = b.build_and(above, below, "")?;
        Ok(b.build_and(ok, fits, "inbounds")?)
    }

    /// i1: `[addr, addr + size)` lies inside `[lo, hi)` and, when `view` (an address in
    /// `like`'s address space, or 0) is not 0, on an element of the strided view whose
    /// record it points at (`launch::ViewLayout::record`).
    pub(crate) fn in_buffer(
        &self,
        addr: IntValue<'ctx>,
        size: usize,
        [lo, hi, view]: [IntValue<'ctx>; 3],
        like: PointerValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let size = self.ctx.i64_type().const_int(size as u64, false);
        self.in_buffer_of(addr, size, size, [lo, hi, view], like.get_type())
    }

    /// i1: the `len` bytes at `addr` (elements of `elem` bytes: a builtin call's extent)
    /// lie inside `[lo, hi)`; in a strided view, whose gaps are not its bytes, only one
    /// element on it may.
    pub(crate) fn in_buffer_extent(
        &self,
        addr: IntValue<'ctx>,
        len: IntValue<'ctx>,
        elem: usize,
        fields: [IntValue<'ctx>; 3],
        like: PointerValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let elem = self.ctx.i64_type().const_int(elem as u64, false);
        self.in_buffer_of(addr, len, elem, fields, like.get_type())
    }

    /// [`Emit::in_buffer_extent`] with the view's address space given (for one element,
    /// `size == elem`).
    fn in_buffer_of(
        &self,
        addr: IntValue<'ctx>,
        size: IntValue<'ctx>,
        elem: IntValue<'ctx>,
        [lo, hi, view]: [IntValue<'ctx>; 3],
        space: inkwell::types::PointerType<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let b = self.b;
        let inside = self.in_range(addr, size, lo, hi)?;
        let on_element = self.in_view(view, addr, space)?;
        let contiguous =
            b.build_int_compare(IntPredicate::EQ, view, view.get_type().const_zero(), "")?;
        let one = b.build_int_compare(IntPredicate::ULE, size, elem, "")?;
        let gapless = b.build_or(contiguous, one, "")?;
        Ok(b.build_and(b.build_and(inside, on_element, "")?, gapless, "")?)
    }

    /// Calls the module's function `name` (defined by `define` on its first use), which
    /// returns an i1.
    fn call_check(
        &self,
        name: &str,
        define: impl FnOnce(&str) -> Result<FunctionValue<'ctx>>,
        args: &[inkwell::values::BasicMetadataValueEnum<'ctx>],
    ) -> Result<IntValue<'ctx>> {
        let func = match self.module.get_function(name) {
            Some(f) => f,
            None => define(name)?,
        };
        let call = self.b.build_call(func, args, "")?;
        match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Ok(v.into_int_value()),
            inkwell::values::ValueKind::Instruction(_) => unreachable!("returns i1"),
        }
    }

    /// i1: `view` is 0, or `addr` is the start of an element of the view whose record
    /// (`[lo, rank, (dim, step) × rank]`) it points at. One function per module and address
    /// space.
    fn in_view(
        &self,
        view: IntValue<'ctx>,
        addr: IntValue<'ctx>,
        ptr: inkwell::types::PointerType<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let name = format!("tritium.in_view.{}", space_of(ptr));
        let record = self.b.build_int_to_ptr(view, ptr, "view")?;
        let define = |name: &str| self.define_in_view(name, ptr);
        self.call_check(&name, define, &[record.into(), addr.into()])
    }

    /// `i1 name(ptr record, i64 addr)`: the greedy decomposition of `addr - lo` over the
    /// record's axes (`launch/view.rs`); a null record accepts every address.
    fn define_in_view(
        &self,
        name: &str,
        ptr: inkwell::types::PointerType<'ctx>,
    ) -> Result<FunctionValue<'ctx>> {
        let (ctx, i64t, i1) = (self.ctx, self.ctx.i64_type(), self.ctx.bool_type());
        let ty = i1.fn_type(&[ptr.into(), i64t.into()], false);
        let func = (self.module).add_function(name, ty, Some(inkwell::module::Linkage::Internal));
        let b = ctx.create_builder();
        let record = func
            .get_nth_param(0)
            .expect("declared with two parameters")
            .into_pointer_value();
        let addr = func
            .get_nth_param(1)
            .expect("declared with two parameters")
            .into_int_value();
        let block = |n: &str| ctx.append_basic_block(func, n);
        let (entry, start, head, body, next, done, yes, no) = (
            block("entry"),
            block("start"),
            block("head"),
            block("body"),
            block("next"),
            block("done"),
            block("yes"),
            block("no"),
        );
        let word = |k: IntValue<'ctx>| -> Result<_> {
            // SAFETY (of the generated code): the record holds `2 + 2 * rank` words.
            let p = unsafe { b.build_gep(i64t, record, &[k], "") }?;
            Ok(b.build_load(i64t, p, "")?.into_int_value())
        };
        let c = |v: u64| i64t.const_int(v, false);
        b.position_at_end(entry);
        let null = b.build_is_null(record, "")?;
        b.build_conditional_branch(null, yes, start)?;
        b.position_at_end(start);
        let off0 = b.build_int_sub(addr, word(c(0))?, "")?;
        let rank = word(c(1))?;
        b.build_unconditional_branch(head)?;
        b.position_at_end(head);
        let k = b.build_phi(i64t, "k")?;
        let off = b.build_phi(i64t, "off")?;
        let (kv, offv) = (
            k.as_basic_value().into_int_value(),
            off.as_basic_value().into_int_value(),
        );
        let more = b.build_int_compare(IntPredicate::ULT, kv, rank, "")?;
        b.build_conditional_branch(more, body, done)?;
        b.position_at_end(body);
        let at = b.build_int_add(b.build_int_mul(kv, c(2), "")?, c(2), "")?;
        let dim = word(at)?;
        let step = word(b.build_int_add(at, c(1), "")?)?;
        let q = b.build_int_unsigned_div(offv, step, "")?;
        let fits = b.build_int_compare(IntPredicate::ULT, q, dim, "")?;
        let rest = b.build_int_sub(offv, b.build_int_mul(q, step, "")?, "")?;
        let k1 = b.build_int_add(kv, c(1), "")?;
        b.build_conditional_branch(fits, next, no)?;
        b.position_at_end(next);
        b.build_unconditional_branch(head)?;
        k.add_incoming(&[(&c(0), start), (&k1, next)]);
        off.add_incoming(&[(&off0, start), (&rest, next)]);
        b.position_at_end(done);
        let exact = b.build_int_compare(IntPredicate::EQ, offv, c(0), "")?;
        b.build_return(Some(&exact))?;
        b.position_at_end(yes);
        b.build_return(Some(&i1.const_int(1, false)))?;
        b.position_at_end(no);
        b.build_return(Some(&i1.const_zero()))?;
        Ok(func)
    }

    /// i1: `[addr, addr + size)` lies inside a buffer of the launch's buffer list at `list`
    /// (`launch::checked::CheckWords`: `[count, (lo, hi, writable, view) × count]`), a
    /// writable one when `write`: the check of a pointer made from an integer, which may
    /// point into any buffer. Calls one function per module that walks the list.
    pub(crate) fn in_any_buffer(
        &self,
        list: PointerValue<'ctx>,
        addr: IntValue<'ctx>,
        size: usize,
        write: bool,
    ) -> Result<IntValue<'ctx>> {
        let len = self.ctx.i64_type().const_int(size as u64, false);
        self.in_any_buffer_extent(list, addr, len, size, write)
    }

    /// [`Emit::in_any_buffer`] for a builtin call's extent: `len` bytes of elements of
    /// `elem` bytes (see [`Emit::in_buffer_extent`]).
    pub(crate) fn in_any_buffer_extent(
        &self,
        list: PointerValue<'ctx>,
        addr: IntValue<'ctx>,
        len: IntValue<'ctx>,
        elem: usize,
        write: bool,
    ) -> Result<IntValue<'ctx>> {
        let ctx = self.ctx;
        let elem = ctx.i64_type().const_int(elem as u64, false);
        let name = format!("tritium.in_buffers.{}", space_of(list.get_type()));
        let args = [
            list.into(),
            addr.into(),
            len.into(),
            elem.into(),
            ctx.bool_type().const_int(u64::from(write), false).into(),
        ];
        let define = |name: &str| self.define_in_buffers(name, list.get_type());
        self.call_check(&name, define, &args)
    }

    /// `i1 name(ptr list, i64 addr, i64 size, i64 elem, i1 write)`: the loop of
    /// [`Emit::in_any_buffer`].
    fn define_in_buffers(
        &self,
        name: &str,
        list_ty: inkwell::types::PointerType<'ctx>,
    ) -> Result<FunctionValue<'ctx>> {
        let (ctx, i64t, i1) = (self.ctx, self.ctx.i64_type(), self.ctx.bool_type());
        let ty = i1.fn_type(
            &[
                list_ty.into(),
                i64t.into(),
                i64t.into(),
                i64t.into(),
                i1.into(),
            ],
            false,
        );
        let func = (self.module).add_function(name, ty, Some(inkwell::module::Linkage::Internal));
        let b = ctx.create_builder();
        let here = Emit {
            ctx,
            b: &b,
            module: self.module,
            half_nans: self.half_nans,
            fp8_cvt: self.fp8_cvt,
        };
        let [list, addr, size, elem, write] = [0, 1, 2, 3, 4].map(|k| {
            func.get_nth_param(k)
                .expect("declared with five parameters")
        });
        let (list, addr, size, elem, write) = (
            list.into_pointer_value(),
            addr.into_int_value(),
            size.into_int_value(),
            elem.into_int_value(),
            write.into_int_value(),
        );
        let block = |n: &str| ctx.append_basic_block(func, n);
        let (entry, head, body, next, yes, no) = (
            block("entry"),
            block("head"),
            block("body"),
            block("next"),
            block("yes"),
            block("no"),
        );
        let word = |k: IntValue<'ctx>| -> Result<_> {
            // SAFETY (of the generated code): the launcher passes `1 + LIST_WORDS * count`
            // words.
            let p = unsafe { b.build_gep(i64t, list, &[k], "") }?;
            Ok(b.build_load(i64t, p, "")?.into_int_value())
        };
        b.position_at_end(entry);
        let count = word(i64t.const_zero())?;
        b.build_unconditional_branch(head)?;
        b.position_at_end(head);
        let i = b.build_phi(i64t, "i")?;
        let more = b.build_int_compare(
            IntPredicate::ULT,
            i.as_basic_value().into_int_value(),
            count,
            "",
        )?;
        b.build_conditional_branch(more, body, no)?;
        b.position_at_end(body);
        let iv = i.as_basic_value().into_int_value();
        let entry_words = i64t.const_int(LIST_WORDS as u64, false);
        let first = b.build_int_mul(iv, entry_words, "")?;
        let at = b.build_int_add(first, i64t.const_int(1, false), "")?;
        let field = |k: u64| word(b.build_int_add(at, i64t.const_int(k, false), "")?);
        let (lo, hi, writable, view) = (field(0)?, field(1)?, field(2)?, field(3)?);
        let inside = here.in_buffer_of(addr, size, elem, [lo, hi, view], list.get_type())?;
        let may_write = b.build_int_compare(IntPredicate::NE, writable, i64t.const_zero(), "")?;
        let allowed = b.build_or(b.build_not(write, "")?, may_write, "")?;
        let ok = b.build_and(inside, allowed, "")?;
        b.build_conditional_branch(ok, yes, next)?;
        b.position_at_end(next);
        let i1v = b.build_int_add(iv, i64t.const_int(1, false), "")?;
        b.build_unconditional_branch(head)?;
        i.add_incoming(&[(&i64t.const_zero(), entry), (&i1v, next)]);
        b.position_at_end(yes);
        b.build_return(Some(&i1.const_int(1, false)))?;
        b.position_at_end(no);
        b.build_return(Some(&i1.const_zero()))?;
        Ok(func)
    }

    /// Claims the fault record at `record` for memory op `site` (its index in
    /// `fault_sites`) unless a fault was recorded already, then fills in the address and
    /// the program id (i32 each). Leaves the builder in a new block of `func`.
    pub(crate) fn record_fault(
        &self,
        func: FunctionValue<'ctx>,
        record: PointerValue<'ctx>,
        site: u32,
        addr: IntValue<'ctx>,
        pids: [IntValue<'ctx>; 3],
    ) -> Result<()> {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let seq = AtomicOrdering::SequentiallyConsistent;
        let id = i64t.const_int(site as u64 + 1, false);
        let r = b.build_cmpxchg(record, i64t.const_zero(), id, seq, seq)?;
        let won = b.build_extract_value(r, 1, "")?.into_int_value();
        let first = self.ctx.append_basic_block(func, "fault.first");
        let done = self.ctx.append_basic_block(func, "fault.done");
        b.build_conditional_branch(won, first, done)?;
        b.position_at_end(first);
        // The address, then the program ids (all widened first), one word each.
        let mut words = vec![addr];
        for p in pids {
            words.push(b.build_int_z_extend(p, i64t, "")?);
        }
        for (k, w) in words.into_iter().enumerate() {
            // SAFETY (of the generated code): the record has `FAULT_WORDS` (5) u64 words.
            let slot =
                unsafe { b.build_gep(i64t, record, &[i64t.const_int(k as u64 + 1, false)], "") }?;
            b.build_store(slot, w)?;
        }
        b.build_unconditional_branch(done)?;
        b.position_at_end(done);
        Ok(())
    }
}

/// A name suffix for functions specialized to `ptr`'s address space.
fn space_of(ptr: inkwell::types::PointerType<'_>) -> String {
    let space = format!("{:?}", ptr.get_address_space());
    space.chars().filter(char::is_ascii_digit).collect()
}
