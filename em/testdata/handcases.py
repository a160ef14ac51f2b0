#!/usr/bin/env python3
"""Independent high-precision computation of the hand-checked cases in
reference_test.go (TestRunHandValues), straight from em/MATH.md.

Run: python3 em/testdata/handcases.py   (needs mpmath; 50 significant digits)

It shares no code with the Go package: distances are direct differences,
softmax is plain exp/sum at 50 digits, and the phase order is the one of
em/MATH.md ("Order of the phases"). The printed values are pasted into
reference_test.go.
"""
from mpmath import mp, mpf, log, exp, pi as PI

mp.dps = 50


def sq(a, b):
    return sum((x - y) ** 2 for x, y in zip(a, b))


def softmax(s):
    top = max(s)
    e = [exp(x - top) for x in s]
    z = sum(e)
    return [x / z for x in e]


def key_score(q, xi, alpha, logpi):
    d = len(q)
    return logpi + mpf(d) / 2 * log(alpha) - alpha / 2 * sq(q, xi)


def joint_score(q, v, xi, alpha, mu, beta, logpi):
    m = len(v)
    return key_score(q, xi, alpha, logpi) + mpf(m) / 2 * log(beta) - beta / 2 * sq(v, mu)


def run(case):
    Q, Xi0, Mu0, A0, B0 = case["Q"], case["Xi0"], case["Mu0"], case["Alpha0"], case["Beta0"]
    h, cfg, S, V = case["h"], case["cfg"], case["S"], case["V"]
    M, d, m = len(Xi0), len(Xi0[0]), len(Mu0[0])
    # linked prior, §2 with per-unit precisions
    l = [A0[j] / 2 * sq(Xi0[j], [0] * d) + B0[j] / 2 * sq(Mu0[j], [0] * m) for j in range(M)]
    top = max(l)
    lz = top + log(sum(exp(x - top) for x in l))
    logpi = [x - lz for x in l]
    xi = [list(r) for r in Xi0]
    mu = [list(r) for r in Mu0]
    alpha, beta = list(A0), list(B0)
    out = {"logpi0": list(logpi)}

    def key_objective():
        tot = mpf(0)
        for q in Q:
            tot += log(sum(exp(logpi[j] + mpf(d) / 2 * log(alpha[j] / (2 * PI)) - alpha[j] / 2 * sq(q, xi[j])) for j in range(M)))
        for j in range(M):
            tot += -h["ThetaXi"] / 2 * sq(xi[j], Xi0[j]) + (h["AAlpha"] - 1) * log(alpha[j]) - h["BAlpha"] * alpha[j]
        return tot

    def prop_objective():
        tot = mpf(0)
        for i in S:
            q, v = Q[i], V[i]
            tot += log(sum(exp(logpi[j] + mpf(d) / 2 * log(alpha[j] / (2 * PI)) - alpha[j] / 2 * sq(q, xi[j])
                               + mpf(m) / 2 * log(beta[j] / (2 * PI)) - beta[j] / 2 * sq(v, mu[j])) for j in range(M)))
        for j in range(M):
            tot += -h["ThetaMu"] / 2 * sq(mu[j], Mu0[j]) + (h["ABeta"] - 1) * log(beta[j]) - h["BBeta"] * beta[j]
            tot += (h["ThetaPi"] - 1) * logpi[j]
        return tot

    out["keyObjective0"] = key_objective()
    out["propObjective0"] = prop_objective()
    # §4
    for _ in range(cfg["K"]):
        w = [softmax([key_score(q, xi[j], alpha[j], logpi[j]) for j in range(M)]) for q in Q]
        for j in range(M):
            n = sum(w[i][j] for i in range(len(Q)))
            xi[j] = [(h["ThetaXi"] * Xi0[j][k] + alpha[j] * sum(w[i][j] * Q[i][k] for i in range(len(Q))))
                     / (h["ThetaXi"] + alpha[j] * n) for k in range(d)]
            if cfg["adaptAlpha"]:
                spread = sum(w[i][j] * sq(Q[i], xi[j]) for i in range(len(Q)))
                alpha[j] = (h["AAlpha"] - 1 + mpf(d) / 2 * n) / (h["BAlpha"] + spread / 2)
    out["keyObjective"] = key_objective()
    # §5
    if S:
        for _ in range(cfg["P"]):
            w = {i: softmax([joint_score(Q[i], V[i], xi[j], alpha[j], mu[j], beta[j], logpi[j]) for j in range(M)]) for i in S}
            newlogpi = list(logpi)
            for j in range(M):
                n = sum(w[i][j] for i in S)
                mu[j] = [(h["ThetaMu"] * Mu0[j][k] + beta[j] * sum(w[i][j] * V[i][k] for i in S))
                         / (h["ThetaMu"] + beta[j] * n) for k in range(m)]
                if cfg["adaptBeta"]:
                    spread = sum(w[i][j] * sq(V[i], mu[j]) for i in S)
                    beta[j] = (h["ABeta"] - 1 + mpf(m) / 2 * n) / (h["BBeta"] + spread / 2)
                if cfg["adaptPi"]:
                    newlogpi[j] = log((n + h["ThetaPi"] - 1) / (len(S) + M * (h["ThetaPi"] - 1)))
            logpi[:] = newlogpi
    out["propObjective"] = prop_objective()
    # §3
    readout = []
    for q in Q:
        w = softmax([key_score(q, xi[j], alpha[j], logpi[j]) for j in range(M)])
        v = [sum(w[j] * mu[j][k] for j in range(M)) for k in range(m)]
        for _ in range(cfg["V"]):
            w = softmax([joint_score(q, v, xi[j], alpha[j], mu[j], beta[j], logpi[j]) for j in range(M)])
            z = sum(w[j] * beta[j] for j in range(M))
            v = [sum(w[j] * beta[j] * mu[j][k] for j in range(M)) / z for k in range(m)]
        readout.append(v)
    out.update(readout=readout, xi=xi, alpha=alpha, mu=mu, beta=beta, logpi=logpi)
    return out


def M_(rows):
    return [[mpf(x) for x in r] for r in rows]


def V_(xs):
    return [mpf(x) for x in xs]


H = dict(ThetaXi=mpf("0.9"), AAlpha=mpf("2.5"), BAlpha=mpf("1.2"), ThetaMu=mpf("0.6"),
         ABeta=mpf("1.8"), BBeta=mpf("0.5"), ThetaPi=mpf("2"))

CASES = {
    "1-D, 2 units, 3 queries, 1 annotated": dict(
        Q=M_([["0.3"], ["-1.2"], ["0.8"]]), Xi0=M_([["-0.5"], ["1"]]), Mu0=M_([["2"], ["-1"]]),
        Alpha0=V_(["1.5", "0.7"]), Beta0=V_(["0.8", "1.3"]), S=[2], V={2: V_(["1.5"])}, h=H,
        cfg=dict(K=2, P=2, V=3, adaptAlpha=True, adaptBeta=True, adaptPi=True)),
    "2-D keys, 3-D values, 3 units, 2 queries, 2 annotated": dict(
        Q=M_([["0.4", "-0.9"], ["1.1", "0.2"]]), Xi0=M_([["0.5", "-0.3"], ["-0.7", "0.8"], ["1.2", "0.6"]]),
        Mu0=M_([["1", "0", "0.2"], ["-0.5", "2", "-0.6"], ["0.3", "-1.4", "0.9"]]),
        Alpha0=V_(["0.9", "1.6", "1.1"]), Beta0=V_(["0.5", "1", "2"]), S=[0, 1],
        V={0: V_(["0.7", "0.9", "-0.1"]), 1: V_(["-0.2", "1.3", "0.4"])}, h=H,
        cfg=dict(K=3, P=2, V=2, adaptAlpha=True, adaptBeta=True, adaptPi=True)),
}


def g(x):
    return mp.nstr(x, 17, min_fixed=-10, max_fixed=10)


for name, case in CASES.items():
    out = run(case)
    print("//", name)
    for k in ["logpi0", "alpha", "beta", "logpi"]:
        print(f"{k}: []float64{{{', '.join(g(x) for x in out[k])}}},")
    for k in ["xi", "mu", "readout"]:
        print(f"{k}: [][]float64{{{', '.join('{' + ', '.join(g(x) for x in r) + '}' for r in out[k])}}},")
    for k in ["keyObjective0", "keyObjective", "propObjective0", "propObjective"]:
        print(f"{k}: {g(out[k])},")
