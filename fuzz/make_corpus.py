#!/usr/bin/env python3
"""Seed corpus for the fuzz targets: slices of the committed fixtures and of ../shared/oracle
(when present), plus small index files built with the broker's putKey algorithm.
Writes fuzz/corpus/<target>/ (git-ignored). Run from anywhere: python3 fuzz/make_corpus.py"""
import os, struct, glob
R=os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
O=R+'/../shared/oracle'
C=R+'/fuzz/corpus'
def w(t, name, b):
    d=os.path.join(C,t); os.makedirs(d, exist_ok=True)
    open(os.path.join(d,name),'wb').write(b)
def rd(p): return open(p,'rb').read()
stores={'fx49':R+'/fixtures/store-4.9','fx5x':R+'/fixtures/store-5x','or49':O+'/basic-4.9/store','or5x':O+'/basic-5.x/store','crash':O+'/crashed-4.9/store'}
stores={k:v for k,v in stores.items() if os.path.isdir(v)}
# commitlog: slices that start at record boundaries
for k,s in stores.items():
    files=sorted(glob.glob(s+'/commitlog/*'))
    if not files: continue
    b=rd(files[0])
    w('commitlog_records',k+'-head',b[:4096])
    # one record alone
    size=struct.unpack('>i',b[:4])[0]
    w('commitlog_records',k+'-one',b[:size])
    # the end of a full file: walk to the blank
    pos=0
    while pos+8<=len(b):
        size,magic=struct.unpack('>iI',b[pos:pos+8])
        if magic==0xCBD43194 or size<=0: break
        pos+=size
    w('commitlog_records',k+'-blank',b[max(0,pos-600):pos+8])
# consume queues
for k,s in stores.items():
    for i,f in enumerate(sorted(glob.glob(s+'/consumequeue/*/*/*'))[:3]):
        w('consumequeue_units',f'{k}-cq{i}',rd(f)[:1000])
    for i,f in enumerate(sorted(glob.glob(s+'/batchconsumequeue/*/*/*'))[:2]):
        w('consumequeue_units',f'{k}-bcq{i}',rd(f)[:1380])
# config
for k,s in stores.items():
    for f in sorted(glob.glob(s+'/config/*.json')):
        w('config_json',k+'-'+os.path.basename(f),rd(f))
# checkpoint
for k,s in stores.items():
    b=rd(s+'/checkpoint')
    w('checkpoint',k,b[:64]); w('checkpoint',k+'-24',b[:24])
# index: small files built with the broker's algorithm
def jhash(s):
    """Java String.hashCode over UTF-16 code units."""
    b=s.encode('utf-16-be'); h=0
    for i in range(0,len(b),2):
        h=(31*h+int.from_bytes(b[i:i+2],'big'))&0xffffffff
    return h-(1<<32) if h>=1<<31 else h
def khash(k):
    h=jhash(k); h=abs(h)
    return 0 if h>=1<<31 else h
def build(slots, entries, keys, begin=1796000000000):
    hdr=[0,0,0,0,0,0]; slot=[0]*slots; ents=[]
    for i,(k,off) in enumerate(keys):
        count=len(ents)+1
        if count>=entries: break
        h=khash(k); s=h%slots; sv=slot[s]
        if sv<=0 or sv>count: sv=0
        ts=begin+i*1500
        diff=0 if hdr[0]<=0 else max(0,min((ts-hdr[0])//1000,2**31-1))
        ents.append((h,off,diff,sv)); slot[s]=count
        if count<=1: hdr[2]=off; hdr[0]=ts
        if sv==0: hdr[4]+=1
        hdr[5]=len(ents)+1; hdr[3]=off; hdr[1]=ts
    b=struct.pack('>qqqqii',*hdr)+b''.join(struct.pack('>i',x) for x in slot)+bytes(20)
    b+=b''.join(struct.pack('>iqii',*e) for e in ents)
    b+=bytes(40+4*slots+20*entries-len(b))
    return b
for slots,entries,n in [(5,10,6),(3,20,19),(16,40,30),(1,4,3),(7,9,0)]:
    keys=[(f'T#{"ab"[i%2]}' if i%3==0 else f'T#k{i}', 1000+i*200) for i in range(n)]
    b=build(slots,entries,keys)
    w('index_file',f's{slots}e{entries}',bytes([slots-1,entries-1])+b)
f=sorted(glob.glob(R+'/fixtures/store-4.9/index/*'))[0]
w('index_file','fx49-real',rd(f))
print('ok')
# store_walk: whole small stores written by `rmqstore gen` in the target's geometry, packed as
# [u16 len][commitlog][u16 len][consume queue][u16 len][index][consumerOffset.json]
import subprocess, tempfile, shutil
exe=os.path.join(R,'target','release','rmqstore')
if os.path.exists(exe):
    for seed,n in [(1,40),(2,90),(3,25)]:
        d=tempfile.mkdtemp()
        s=os.path.join(d,'s')
        subprocess.run([exe,'gen',s,'--messages',str(n),'--seed',str(seed),'--commitlog-file-size','32768',
                        '--cq-file-units','50','--index-slots','8','--index-entries','16'],check=True,stdout=subprocess.DEVNULL)
        cls=sorted(glob.glob(s+'/commitlog/*'))
        cl=b''.join(rd(f) for f in cls[:2])
        cl=cl.rstrip(b'\0')[:65535]
        cqs=sorted(glob.glob(s+'/consumequeue/*/*/*'))
        cq=(rd(cqs[0]).rstrip(b'\0') if cqs else b'')[:1000]
        ixs=sorted(glob.glob(s+'/index/*'))
        ix=(rd(ixs[0]) if ixs else b'')[:65535]
        co=rd(s+'/config/consumerOffset.json') if os.path.exists(s+'/config/consumerOffset.json') else b'{}'
        pack=b''.join(struct.pack('<H',len(x))+x for x in (cl,cq,ix))+co
        w('store_walk',f'gen-{seed}',pack)
        shutil.rmtree(d)
