"""Pure-Python xoshiro256** / splitmix64 / polar normals, bit-for-bit the same as
``kernels.rng`` (64-bit arithmetic done on Python ints with a mask)."""
import math

M = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return x, z ^ (z >> 31)


class Xoshiro:
    def __init__(self, key, row):
        x = (int(key) ^ ((int(row) * 0xD1B54A32D192ED03) & M)) & M
        self.s = []
        for _ in range(4):
            x, z = splitmix64(x)
            self.s.append(z)

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & M

    def next_u64(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & M, 7) * 9) & M
        t = (s[1] << 17) & M
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def next_double(self):
        return (self.next_u64() >> 11) * (1.0 / 9007199254740992.0)

    def next_normal_pair(self):
        while True:
            u = 2.0 * self.next_double() - 1.0
            v = 2.0 * self.next_double() - 1.0
            s = u * u + v * v
            if 0.0 < s < 1.0:
                f = math.sqrt(-2.0 * math.log(s) / s)
                return u * f, v * f
