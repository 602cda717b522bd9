/*
 * replay_main.c — replays fuzz corpora through a target's
 * LLVMFuzzerTestOneInput, as an ordinary test (any compiler, no libFuzzer).
 * Usage: fuzz_replay_<target> DIR_OR_FILE...  Exits non-zero if an argument
 * cannot be read or holds no input; a property violation aborts.
 * Every prefix of an input is replayed too, unless the target is built with
 * FUZZ_REPLAY_PREFIXES=0 (fuzz_transport: an input costs real connections; its
 * seeds hold their truncations themselves).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

#ifndef FUZZ_REPLAY_PREFIXES
#define FUZZ_REPLAY_PREFIXES 1
#endif

static int replay_file(const char *path, unsigned *count)
{
    FILE *f = fopen(path, "rb");
    long n;
    uint8_t *buf;
    if (f == NULL) return -1;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    buf = malloc((size_t)n + 1u);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    /* Every prefix too: truncated input is the most common malformation. */
    for (long k = FUZZ_REPLAY_PREFIXES ? 0 : n; k <= n; k++) {
        uint8_t *copy = malloc((size_t)k + 1u); /* exact-size copy: ASan sees overreads */
        if (copy == NULL) break;
        memcpy(copy, buf, (size_t)k);
        LLVMFuzzerTestOneInput(copy, (size_t)k);
        free(copy);
    }
    free(buf);
    (*count)++;
    return 0;
}

int main(int argc, char **argv)
{
    unsigned count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: cannot stat %s\n", argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *dir = opendir(argv[i]);
            struct dirent *e;
            if (dir == NULL) return 1;
            while ((e = readdir(dir)) != NULL) {
                char path[4096];
                if (e->d_name[0] == '.') continue;
                snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                if (replay_file(path, &count) != 0) {
                    fprintf(stderr, "replay: cannot read %s\n", path);
                    closedir(dir);
                    return 1;
                }
            }
            closedir(dir);
        } else if (replay_file(argv[i], &count) != 0) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 1;
        }
    }
    printf("replay: %u inputs%s replayed without a finding\n", count,
           FUZZ_REPLAY_PREFIXES ? " (and all their prefixes)" : "");
    if (count == 0) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    printf("%u passed, 0 failed\n", count);
    return 0;
}
