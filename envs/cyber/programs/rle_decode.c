/* rle_decode: expands run-length text. Each run is a digit 1-9 followed by the character
 * to repeat: "3a2b1c" decodes to "aaabbc". The decoded text is printed.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define MAX_DECODED 64

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
    char input[256] = {0};
    if (!fgets(input, sizeof input, f))
        input[0] = '\0';
    fclose(f);
    input[strcspn(input, "\r\n")] = '\0';
    char out[MAX_DECODED + 1];
    size_t n = 0;
    for (size_t i = 0; input[i] != '\0'; i += 2) {
        if (!isdigit((unsigned char)input[i]) || input[i] == '0' || input[i + 1] == '\0') {
            printf("bad run at offset %zu\n", i);
            return 1;
        }
        int count = input[i] - '0';
        for (int k = 0; k < count; k++)
            out[n++] = input[i + 1];
    }
    out[n] = '\0';
    printf("%s\n", out);
    return 0;
}
