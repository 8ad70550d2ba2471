"""What each kernel of a CUBIN needs from the GPU, read from the image NVRTC produced: its
registers per thread, static shared memory, local-memory frame and the block size its
`__launch_bounds__` allows. With these the emulated driver refuses the launches a real GPU
would refuse (too many registers or threads for the block, too much shared memory), which a
launch that only runs the kernel's NumPy model cannot see.

A CUBIN is an ELF64 file. Where the numbers sit (facts of NVIDIA's format, as the CUDA
binary utilities print them):
  - `.nv.info`, the image's attribute list: EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE
    (0x11) entries, each a (symbol index, value) pair of 32-bit words;
  - `.nv.info.<kernel>`, the kernel's own list: EIATTR_MAX_THREADS (0x05), three 32-bit
    words (x, y, z), present when the kernel declares `__launch_bounds__`;
  - `.nv.shared.<kernel>`: a no-bits section whose size is the kernel's static shared memory;
    in an image that also has a `.nv.shared.reserved.0` section (sm_90's), that size includes
    the 1 KiB per block the system reserves (cudaDevAttrReservedSharedMemoryPerBlock), which
    a kernel's own limit does not count.
An attribute list is a run of entries: a format byte, an attribute byte, then by format
nothing (0x01; two unused bytes), a 16-bit value (0x02, 0x03), or a 16-bit size and that many bytes (0x04).

    python -m spec_tests.cubin_resources [sm_90]   # the table for every kernel program
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2f

# The limits of one block on sm_80 and sm_90 (CUDA C++ Programming Guide, compute capability
# tables): 65,536 registers, allocated per warp in units of 256; 1,024 threads; 48 KiB of
# shared memory unless the kernel opts in to more (the plugin never does).
REGISTERS_PER_BLOCK = 65536
REGISTER_UNIT_PER_WARP = 256
THREADS_PER_BLOCK = 1024
SHARED_BYTES_PER_BLOCK = 48 * 1024
SYSTEM_RESERVED_SHARED = 1024
WARP = 32

SHT_NOBITS = 8                            # a section that takes no bytes of the file
_SECTION = struct.Struct("<IIQQQQIIQQ")   # ELF64 section header
_SYMBOL = struct.Struct("<IBBHQQ")        # ELF64 symbol


@dataclass(frozen=True)
class KernelResources:
    registers: int            # per thread
    static_shared: int        # bytes
    frame: int                # bytes of local memory per thread (spills, local arrays)
    max_threads: int | None   # from __launch_bounds__, None when undeclared

    def launch_problem(self, threads, dynamic_shared):
        """Why a GPU would refuse a block of `threads` threads with `dynamic_shared` bytes of
        dynamic shared memory, or None when it would run it."""
        if threads > THREADS_PER_BLOCK:
            return f"{threads} threads exceed the {THREADS_PER_BLOCK} of a block"
        if self.max_threads is not None and threads > self.max_threads:
            return f"{threads} threads exceed the kernel's __launch_bounds__ ({self.max_threads})"
        per_warp = -(-self.registers * WARP // REGISTER_UNIT_PER_WARP) * REGISTER_UNIT_PER_WARP
        needed = per_warp * -(-threads // WARP)
        if needed > REGISTERS_PER_BLOCK:
            return (f"{threads} threads of {self.registers} registers need {needed} "
                    f"registers, more than the {REGISTERS_PER_BLOCK} of a block")
        shared = self.static_shared + dynamic_shared
        if shared > SHARED_BYTES_PER_BLOCK:
            return (f"{shared} bytes of shared memory ({self.static_shared} static) exceed the "
                    f"{SHARED_BYTES_PER_BLOCK} of a block")
        return None


def kernel_resources(image):
    """{lowered kernel name: KernelResources} for every kernel (a function with a register
    count) in the CUBIN `image`."""
    image = bytes(image)
    if image[:4] != b"\x7fELF" or image[4] != 2:
        raise ValueError("not an ELF64 image (a CUBIN)")
    sections, no_bits = _sections(image)
    symbols = _symbol_names(sections)
    registers, frames = {}, {}
    for fmt, attribute, value in _attributes(sections.get(".nv.info", b"")):
        if fmt == 0x04 and attribute in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE):
            symbol, number = struct.unpack_from("<II", value)
            (registers if attribute == EIATTR_REGCOUNT else frames)[symbols[symbol]] = number
    reserved = SYSTEM_RESERVED_SHARED if ".nv.shared.reserved.0" in no_bits else 0
    return {name: KernelResources(count, _own_shared(no_bits, name, reserved),
                                  frames.get(name, 0), _max_threads(sections, name))
            for name, count in registers.items()}


def _own_shared(no_bits, kernel, reserved):
    """The kernel's static shared memory, without what the system reserves."""
    size = no_bits.get(".nv.shared." + kernel)
    if size is None:
        return 0
    if size < reserved:
        raise ValueError(f"{kernel}: {size} bytes of shared memory, less than the "
                         f"{reserved} the image should count as reserved")
    return size - reserved


def _sections(image):
    """({name: contents} of the sections with contents, {name: size} of the no-bits ones)."""
    (table,) = struct.unpack_from("<Q", image, 0x28)
    entry_size, count, names_index = struct.unpack_from("<HHH", image, 0x3A)
    headers = [_SECTION.unpack_from(image, table + i * entry_size) for i in range(count)]
    names_at = headers[names_index][4]
    contents, no_bits = {}, {}
    for name, kind, _flags, _addr, offset, size, *_ in headers:
        label = _string(image, names_at + name)
        if kind == SHT_NOBITS:
            no_bits[label] = size
        else:
            contents[label] = image[offset:offset + size]
    return contents, no_bits


def _symbol_names(sections):
    table, strings = sections[".symtab"], sections[".strtab"]
    names = []
    for i in range(len(table) // _SYMBOL.size):
        name = _SYMBOL.unpack_from(table, i * _SYMBOL.size)[0]
        names.append(_string(strings, name))
    return names


def _max_threads(sections, kernel):
    for fmt, attribute, value in _attributes(sections.get(".nv.info." + kernel, b"")):
        if fmt == 0x04 and attribute == EIATTR_MAX_THREADS:
            x, y, z = struct.unpack_from("<III", value)
            return x * y * z
    return None


def _attributes(data):
    """(format, attribute, value) for each entry of an attribute list."""
    at = 0
    while at < len(data):
        fmt, attribute = data[at], data[at + 1]
        if fmt == 0x04:
            (size,) = struct.unpack_from("<H", data, at + 2)
            yield fmt, attribute, data[at + 4:at + 4 + size]
            at += 4 + size
        elif fmt in (0x02, 0x03):
            yield fmt, attribute, struct.unpack_from("<H", data, at + 2)[0]
            at += 4
        elif fmt == 0x01:
            yield fmt, attribute, None
            at += 4   # (entries keep 4-byte alignment: two unused bytes)
        else:
            raise ValueError(f"unknown attribute format {fmt:#x} at byte {at}")


def _string(data, offset):
    return data[offset:data.index(b"\0", offset)].decode()


def _main(arch="sm_90"):
    from reftorch_cuda import ops
    print(f"{'kernel':72s} {'regs':>4s} {'shared':>6s} {'frame':>5s} {'bound':>5s}")
    for program in ops.PROGRAMS:
        compiled = program.compile(arch)
        names = {lowered: expression for expression, lowered in compiled.lowered.items()}
        for lowered, r in sorted(kernel_resources(compiled.image).items()):
            label = names.get(lowered, lowered)[:72]
            print(f"{label:72s} {r.registers:4d} {r.static_shared:6d} {r.frame:5d} "
                  f"{r.max_threads or '-':>5}")


if __name__ == "__main__":
    import sys
    _main(*sys.argv[1:])
