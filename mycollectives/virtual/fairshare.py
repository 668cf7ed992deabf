"""Max-min fair rates of a few flows in plain Python, float for float as :func:`mycollectives.sim.fluid.max_min_rates`.

The virtual network re-shares its links whenever a flow starts or ends
(``network.py``): thousands of times a run, each time among a few dozen
flows, where NumPy's fixed cost per call outweighs the work. Progressive
filling is done here with the same operation on each value as ``fluid.py``
(each link's share ``remaining / max(users, 1)``, each flow's tightest link,
the smallest of those, the flows within ``1 + 1e-9`` of it frozen, each link's
remainder ``max(remaining - frozen users x share, 0)``), so the rates are the
same floats; only minima are taken in another order, which gives the same
value. ``tests/test_virtual_fairshare.py`` compares the two.
"""

from __future__ import annotations

from ..sim.fluid import EPS

SMALL = 64  # up to this many flows, the network shares its links here; above, with NumPy


def fair_rates(routes: list[list[int]], cap: dict[int, float]) -> list[float]:
    """The max-min fair rate of each flow, ``routes[i]`` the links of flow ``i`` (a flow with none gets 0),
    ``cap[link]`` each link's capacity."""
    rem = {link: cap[link] for route in routes for link in route}
    rate = [0.0] * len(routes)
    live = [i for i, route in enumerate(routes) if route]
    while live:
        users = dict.fromkeys(rem, 0)
        for i in live:
            for link in routes[i]:
                users[link] += 1
        share = {link: rem[link] / (u if u > 1 else 1) for link, u in users.items()}
        tightest = [min([share[link] for link in routes[i]]) for i in live]
        s = min(tightest)
        at_most = s * (1 + EPS)
        frozen, keep = dict.fromkeys(rem, 0), []
        for i, fs in zip(live, tightest):
            if fs <= at_most:
                rate[i] = s
                for link in routes[i]:
                    frozen[link] += 1
            else:
                keep.append(i)
        for link, left in rem.items():
            x = left - frozen[link] * s
            rem[link] = 0.0 if x <= 0.0 else x  # as np.maximum(x, 0): NaN stays, -0.0 becomes 0.0
        live = keep
    return rate
