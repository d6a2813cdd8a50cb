/* image_header: reads an image header "P6 <width> <height> <channels>" and reports how
 * large the pixel buffer of a decoder would be. Width and height may be 1..65536 and
 * channels 1..4 (gray, gray+alpha, RGB, RGBA).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIDE 65536

static int buffer_size(int width, int height, int channels) {
    int row_bytes = width * channels;
    return row_bytes * height;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    char magic[3] = {0};
    int width, height, channels;
    int got = fscanf(f, "%2s %d %d %d", magic, &width, &height, &channels);
    fclose(f);
    if (got != 4 || strcmp(magic, "P6") != 0) {
        printf("not an image header\n");
        return 1;
    }
    if (width < 1 || width > MAX_SIDE || height < 1 || height > MAX_SIDE || channels < 1 ||
        channels > 4) {
        printf("unsupported size\n");
        return 1;
    }
    int size = buffer_size(width, height, channels);
    printf("%d x %d x %d: %d bytes\n", width, height, channels, size);
    unsigned char *pixels = malloc((size_t)size);
    if (!pixels) {
        printf("out of memory\n");
        return 1;
    }
    memset(pixels, 0, (size_t)size);
    free(pixels);
    return 0;
}
