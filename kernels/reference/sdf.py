"""Twin of ``kernels.sdf``: the same SD file text with Python string formatting."""


def format_sdf(titles, header_line, z, charge, atom_offset, xyz, bond_offset, bonds, elements) -> str:
    lines = []
    push = lines.append
    for m, name in enumerate(titles):
        lo, hi = int(atom_offset[m]), int(atom_offset[m + 1])
        blo, bhi = int(bond_offset[m]), int(bond_offset[m + 1])
        push(name)
        push(header_line)
        push("")
        push(f"{hi - lo:3d}{bhi - blo:3d}  0  0  0  0  0  0  0  0999 V2000")
        for a in range(lo, hi):
            x, y, zz = xyz[a]
            push(f"{x:10.4f}{y:10.4f}{zz:10.4f} {elements[z[a]]:<3} 0  0  0  0  0  0  0  0  0  0  0  0")
        for b in range(blo, bhi):
            i, j, order = bonds[b]
            push(f"{i + 1:3d}{j + 1:3d}{order:3d}  0")
        charged = [(a - lo + 1, int(charge[a])) for a in range(lo, hi) if charge[a] != 0]
        for k in range(0, len(charged), 8):
            chunk = charged[k:k + 8]
            push(f"M  CHG{len(chunk):3d}" + "".join(f"{i:4d}{c:4d}" for i, c in chunk))
        push("M  END")
        push("$$$$")
    return "\n".join(lines) + "\n"
