import re, sys, statistics as S, collections
rows = collections.defaultdict(list)
oha = {}
for line in open(sys.argv[1]):
    kv = dict(re.findall(r'(\w+)=(\S+)', line))
    if kv.get('name') == 'oha-json': oha[kv['round']] = kv
skip = set(sys.argv[2:])  # round:name pairs disturbed
for line in open(sys.argv[1]):
    kv = dict(re.findall(r'(\w+)=(\S+)', line))
    name = kv.get('name')
    if name == 'oha-json' or f"{kv.get('round')}:{name}" in skip: continue
    m = re.search(r'TIME (\S+) (\S+) (\d+) (\d+)', line)
    if not m: continue
    u, s, v, i = float(m[1]), float(m[2]), int(m[3]), int(m[4])
    n = 200000
    r = dict(round=kv['round'], noisy=kv.get('machine')=='NOISY' or int(kv['cpu1_busy_jiffies'])>700,
             cpu=(u+s)*1e6/n, user=u, sys=s, cs=(v+i)/n, cpu1=int(kv['cpu1_busy_jiffies']))
    if 'lag_p99_us' in kv:
        r.update(lag50=kv['lag_p50_us'], lag99=kv['lag_p99_us'], tx50=kv.get('txlag_p50_us','-'), tx99=kv.get('txlag_p99_us','-'),
                 lat50=kv['lat_p50_us'], lat99=kv['lat_p99_us'], blocked=kv['blocked'], waits=kv['waits_per_req'])
    g = re.search(r'Generator lag: p50 (\S+), p99 (\S+),', line)
    if g: r.update(lag50=g[1], lag99=g[2])
    l = re.search(r' 50.0000%\s+(\S+)\s+99.0000%\s+(\S+)', line)
    if l: r.update(lat50=l[1], lat99=l[2])
    if name == 'oha':
        o = oha.get(kv['round'], {})
        r.update(lat50=o.get('p50_us'), lat99=o.get('p99_us'), rps=o.get('rps'))
    rows[name].append(r)
med = {}
for name, rs in rows.items():
    cpus = [r['cpu'] for r in rs]
    med[name] = S.median(cpus)
    print(f"{name:18s} n={len(rs)} cpu_us/req median={S.median(cpus):5.1f} (runs {' '.join('%.1f%s'%(r['cpu'],'*' if r['noisy'] else '') for r in rs)}) cs/req median={S.median([r['cs'] for r in rs]):.2f} user_s={S.median([r['user'] for r in rs]):.2f} sys_s={S.median([r['sys'] for r in rs]):.2f}")
    for r in rs:
        print('    r%s cpu1=%d %s' % (r['round'], r['cpu1'], ' '.join(f'{k}={r[k]}' for k in ('lag50','lag99','tx50','tx99','lat50','lat99','blocked','waits','rps') if k in r)))
print()
for a, b in [('link','epoll'),('link-skip','epoll'),('link-defer16','epoll'),('chain','epoll'),('epoll','oha'),('link','oha'),('link-skip','oha'),('link-defer16','oha'),('ingressbench','oha'),('epoll','ingressbench')]:
    if a in med and b in med: print(f"{a}/{b} = {med[a]/med[b]:.2f}")
