"""Runs each case of a diff.ts output through `dgw motebit verdict` and
reports every case where dgw's answer is not the reference's (a verdict
that differs, a refusal where the reference answered, an answer where it
threw). Usage: python3 compare.py cases.json [path/to/dgw]"""
import json, subprocess, sys, tempfile, os
cases=json.load(open(sys.argv[1]))
bad=0
for c in cases:
    f=tempfile.NamedTemporaryFile('w',suffix='.json',delete=False); json.dump(c,f); f.close()
    p=subprocess.run([(sys.argv[2] if len(sys.argv) > 2 else 'target/debug/dgw'),'motebit','verdict',f.name],capture_output=True)
    os.unlink(f.name)
    if c.get('throws'):
        if p.returncode!=2:
            bad+=1; print('THROWS-MISMATCH', c['name'], c['throws'], p.returncode, p.stdout[:200]); 
        continue
    if p.returncode==2:
        bad+=1; print('REFUSED', c['name'], p.stderr[:300], json.dumps(c['input'])[:300]); continue
    got=json.loads(p.stdout)
    if got!=c['expected']:
        bad+=1; print('DIFF', c['name'], json.dumps(c['input'])[:600]); print('  ref', json.dumps(c['expected'])[:400]); print('  dgw', json.dumps(got)[:400])
print('bad', bad, 'of', len(cases))
