"""Bessel functions J0, J1, Y0, Y1 for Triton, evaluated as eager's kernels evaluate them.

Eager's CPU and CUDA kernels (`bessel_j0_forward` ... in ATen/native/Math.h, and the same
text jitted on CUDA) use the Cephes rational approximations in the input's dtype.
libdevice's j0/y1 are other approximations: on float64 they differ from eager's by up to
6e-7 where the functions cross zero. These helpers are the same polynomials, the same
Horner order and the same final expressions over `tl` primitives (so they also run under
the Triton interpreter). A kernel that calls one gets all four in its wrapper's prelude
(Y0 and Y1 call J0 and J1).

In: nothing (the coefficients are data). Out: `TRITON_BESSEL_HELPERS`, Triton source text.
"""

from __future__ import annotations

# Shared by J0 and Y0 (P and Q of the asymptotic form), and by J1 and Y1.
_P0 = ("7.96936729297347051624e-04", "8.28352392107440799803e-02", "1.23953371646414299388e+00",
       "5.44725003058768775090e+00", "8.74716500199817011941e+00", "5.30324038235394892183e+00",
       "9.99999999999999997821e-01")
_PQ0 = ("9.24408810558863637013e-04", "8.56288474354474431428e-02",
        "1.25352743901058953537e+00", "5.47097740330417105182e+00",
        "8.76190883237069594232e+00", "5.30605288235394617618e+00",
        "1.00000000000000000218e+00")
_QP0 = ("-1.13663838898469149931e-02", "-1.28252718670509318512e+00",
        "-1.95539544257735972385e+01", "-9.32060152123768231369e+01",
        "-1.77681167980488050595e+02", "-1.47077505154951170175e+02",
        "-5.14105326766599330220e+01", "-6.05014350600728481186e+00")
_QQ0 = ("6.43178256118178023184e+01", "8.56430025976980587198e+02", "3.88240183605401609683e+03",
        "7.24046774195652478189e+03", "5.93072701187316984827e+03", "2.06209331660327847417e+03",
        "2.42005740240291393179e+02")
_P1 = ("7.62125616208173112003e-04", "7.31397056940917570436e-02", "1.12719608129684925192e+00",
       "5.11207951146807644818e+00", "8.42404590141772420927e+00", "5.21451598682361504063e+00",
       "1.00000000000000000254e+00")
_PQ1 = ("5.71323128072548699714e-04", "6.88455908754495404082e-02",
        "1.10514232634061696926e+00", "5.07386386128601488557e+00",
        "8.39985554327604159757e+00", "5.20982848682361821619e+00",
        "9.99999999999999997461e-01")
_QP1 = ("5.10862594750176621635e-02", "4.98213872951233449420e+00", "7.58238284132545283818e+01",
        "3.66779609360150777800e+02", "7.10856304998926107277e+02", "5.97489612400613639965e+02",
        "2.11688757100572135698e+02", "2.52070205858023719784e+01")
_QQ1 = ("7.42373277035675149943e+01", "1.05644886038262816351e+03", "4.98641058337653607651e+03",
        "9.56231892404756170795e+03", "7.99704160447350683650e+03", "2.82619278517639096600e+03",
        "3.36093607810698293419e+02")
_RP0 = ("-4.79443220978201773821e+09", "1.95617491946556577543e+12",
        "-2.49248344360967716204e+14", "9.70862251047306323952e+15")
_RQ0 = ("4.99563147152651017219e+02", "1.73785401676374683123e+05", "4.84409658339962045305e+07",
        "1.11855537045356834862e+10", "2.11277520115489217587e+12", "3.10518229857422583814e+14",
        "3.18121955943204943306e+16", "1.71086294081043136091e+18")
_RP1 = ("-8.99971225705559398224e+08", "4.52228297998194034323e+11",
        "-7.27494245221818276015e+13", "3.68295732863852883286e+15")
_RQ1 = ("6.20836478118054335476e+02", "2.56987256757748830383e+05", "8.35146791431949253037e+07",
        "2.21511595479792499675e+10", "4.74914122079991414898e+12", "7.84369607876235854894e+14",
        "8.95222336184627338078e+16", "5.32278620332680085395e+18")
_YP0 = ("1.55924367855235737965e+04", "-1.46639295903971606143e+07", "5.43526477051876500413e+09",
        "-9.82136065717911466409e+11", "8.75906394395366999549e+13",
        "-3.46628303384729719441e+15", "4.42733268572569800351e+16",
        "-1.84950800436986690637e+16")
_YQ0 = ("1.04128353664259848412e+03", "6.26107330137134956842e+05", "2.68919633393814121987e+08",
        "8.64002487103935000337e+10", "2.02979612750105546709e+13", "3.17157752842975028269e+15",
        "2.50596256172653059228e+17")
_YP1 = ("1.26320474790178026440e+09", "-6.47355876379160291031e+11", "1.14509511541823727583e+14",
        "-8.12770255501325109621e+15", "2.02439475713594898196e+17",
        "-7.78877196265950026825e+17")
_YQ1 = ("5.94301592346128195359e+02", "2.35564092943068577943e+05", "7.34811944459721705660e+07",
        "1.87601316108706159478e+10", "3.88231277496238566008e+12", "6.20557727146953693363e+14",
        "6.87141087355300489866e+16", "3.97270608116560655612e+18")

_PIO4, _3PIO4 = "0.785398163397448309615660845819875721", "2.356194490192344928846982537459627163"
_SQ2OPI = "0.797884560802865355879892119868763737"
_TWOOPI = "0.636619772367581343075535053490057448"


def horner(coefficients: tuple[str, ...], z: str) -> str:
    """Eager's loop `p = p * z + c[i]` from p = 0, unrolled (0 * z + c[0] is c[0])."""
    text = coefficients[0]
    for c in coefficients[1:]:
        text = f"({text}) * {z} + {c}" if text.startswith("(") or " " in text \
            else f"{text} * {z} + {c}"
    return text


def _asymptotic(p: tuple[str, ...], pq: tuple[str, ...], qp: tuple[str, ...],
                qq: tuple[str, ...], w: str, lead: str, trail: str, sign: str, phase: str
                ) -> list[str]:
    """x > 5: (P(w)/Q(w) * lead(x - phase) sign 5/x * (P'(w)/Q'(w)) * trail(x - phase))
    * sqrt(2/pi) / sqrt(x), as eager writes it."""
    return [f"    w = {w}",
            f"    pp = {horner(p, 'w')}", f"    pq = {horner(pq, 'w')}",
            f"    qp = {horner(qp, 'w')}", f"    qq = {horner(qq, 'w')}",
            f"    far = (pp / pq * tl.{lead}(ax - {phase}) {sign} 5.0 / ax * (qp / qq) * "
            f"tl.{trail}(ax - {phase})) * {_SQ2OPI} / tl.sqrt(ax)"]


def _j0() -> list[str]:
    return ["@triton.jit", "def _ks_bessel_j0(x):", "    ax = tl.abs(x)", "    z = ax * ax",
            f"    rp = {horner(_RP0, 'z')}", f"    rq = {horner(_RQ0, 'z')}",
            "    near = (z - 5.78318596294678452118e+00) * (z - 3.04712623436620863991e+01) "
            "* rp / rq",
            "    tiny = 1.0 - z / 4.0",
            *_asymptotic(_P0, _PQ0, _QP0, _QQ0, "25.0 / z", "cos", "sin", "-", _PIO4),
            "    return tl.where(ax <= 5.0, tl.where(ax < 0.00001, tiny, near), far)"]


def _j1() -> list[str]:
    # Eager: J1(-x) = -J1(x), and its asymptotic form's w is 5/x * (5/x), not 25/x^2.
    return ["@triton.jit", "def _ks_bessel_j1(x):", "    ax = tl.abs(x)", "    z = ax * ax",
            f"    rp = {horner(_RP1, 'z')}", f"    rq = {horner(_RQ1, 'z')}",
            "    near = rp / rq * ax * (z - 1.46819706421238932572e+01) "
            "* (z - 4.92184563216946036703e+01)",
            *_asymptotic(_P1, _PQ1, _QP1, _QQ1, "5.0 / ax * (5.0 / ax)", "cos", "sin", "-",
                         _3PIO4),
            "    r = tl.where(ax <= 5.0, near, far)",
            "    return tl.where(x < 0.0, -r, tl.where(x == 0.0, x, r))  # J1(-0.0) is -0.0"]


def _y0() -> list[str]:
    return ["@triton.jit", "def _ks_bessel_y0(x):", "    ax = x", "    z = x * x",
            f"    yp = {horner(_YP0, 'z')}", f"    yq = {horner(_YQ0, 'z')}",
            f"    near = yp / yq + ({_TWOOPI} * tl.log(x) * _ks_bessel_j0(x))",
            *_asymptotic(_P0, _PQ0, _QP0, _QQ0, "25.0 / z", "sin", "cos", "+", _PIO4),
            "    near = tl.where(x == 0.0, float('-inf'), tl.where(x < 0.0, float('nan'), near))",
            "    return tl.where(x <= 5.0, near, far)"]


def _y1() -> list[str]:
    return ["@triton.jit", "def _ks_bessel_y1(x):", "    ax = x", "    z = x * x",
            f"    yp = {horner(_YP1, 'z')}", f"    yq = {horner(_YQ1, 'z')}",
            f"    near = x * (yp / yq) + ({_TWOOPI} * (_ks_bessel_j1(x) * tl.log(x) - 1.0 / x))",
            *_asymptotic(_P1, _PQ1, _QP1, _QQ1, "5.0 / x * (5.0 / x)", "sin", "cos", "+",
                         _3PIO4),
            "    near = tl.where(x == 0.0, float('-inf'), tl.where(x < 0.0, float('nan'), near))",
            "    return tl.where(x <= 5.0, near, far)"]


TRITON_BESSEL_HELPERS = "\n" + "\n\n\n".join(
    "\n".join(f()) for f in (_j0, _j1, _y0, _y1)) + "\n"
TRITON_BESSEL_CALL = "_ks_bessel_"  # a kernel whose source has this needs the helpers
