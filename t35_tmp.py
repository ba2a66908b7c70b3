import socket, time, errno
from p4hub.hosts import gso
print("lo iface", gso.egress_interface("127.0.0.1"), gso.checksum_offload("lo"), gso.path_supports_gso("127.0.0.1"))
r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(("127.0.0.1", 0)); r.setblocking(False)
r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4<<20)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
g = gso.GsoSender(s, 64, (errno.EAGAIN,))
data = b"".join(bytes([i % 256]) * 1044 for i in range(150))
print(g.send_rows(data, 1044, r.getsockname(), runs=[10]), g.gso_sends)
time.sleep(0.05)
got = []
while True:
    try: got.append(r.recv(70000))
    except BlockingIOError: break
print(len(got), set(len(x) for x in got), all(got[i][0] == i % 256 for i in range(len(got))))
# raw ceiling
N=20000
t=time.perf_counter()
for _ in range(N//62):
    g.send_rows(data[:62*1044], 1044, r.getsockname())
    try:
        while True: r.recv(70000)
    except BlockingIOError: pass
dt=time.perf_counter()-t
print("gso MB/s", N//62*62*1044/dt/1e6)
