/* aio_probe.c - run inside a sandbox as a command: leaves asynchronous I/O
 * in flight at its end. It writes SIZE bytes of a pattern to src, makes dst
 * SIZE bytes of zeros, maps dst MAP_SHARED and submits one io_submit
 * IOCB_CMD_PREAD of all of src into that mapping, then exits without
 * waiting: were the read to go on after the command's end, dst would change
 * after files_changed was computed. Prints "submitted: <n>". Built static:
 * the sandbox's root filesystem holds no compiler or interpreter.
 * Usage: aio-probe SRC DST SIZE */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    size_t size = strtoull(argv[3], NULL, 10);
    int src = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    int dst = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (src < 0 || dst < 0 || ftruncate(dst, (off_t)size) != 0) {
        perror("aio-probe: files");
        return 1;
    }
    static char chunk[1 << 20];
    memset(chunk, 'p', sizeof chunk);
    for (size_t done = 0; done < size;) {
        size_t n = size - done < sizeof chunk ? size - done : sizeof chunk;
        if (write(src, chunk, n) != (ssize_t)n) {
            perror("aio-probe: write");
            return 1;
        }
        done += n;
    }
    void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dst, 0);
    aio_context_t ctx = 0;
    if (map == MAP_FAILED || syscall(SYS_io_setup, 1, &ctx) != 0) {
        perror("aio-probe: mmap or io_setup");
        return 1;
    }
    struct iocb cb;
    memset(&cb, 0, sizeof cb);
    cb.aio_lio_opcode = IOCB_CMD_PREAD;
    cb.aio_fildes = (unsigned)src;
    cb.aio_buf = (unsigned long)map;
    cb.aio_nbytes = size;
    struct iocb *cbs[1] = {&cb};
    long n = syscall(SYS_io_submit, ctx, 1, cbs);
    printf("submitted: %ld\n", n);
    fflush(stdout);
    _exit(n == 1 ? 0 : 1);
}
