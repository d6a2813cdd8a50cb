/* packet: decodes one packet and prints its payload in hex.
 * Packet: "PKT", a version digit, a two-digit decimal payload length, then the payload.
 * Example: PKT105hello (version 1, 5 payload bytes "hello").
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define MAX_PAYLOAD 32

struct packet {
    int version;
    int length;
    unsigned char payload[MAX_PAYLOAD];
};

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    unsigned char raw[160] = {0};
    size_t n = fread(raw, 1, sizeof raw, f);
    fclose(f);
    if (n < 6 || memcmp(raw, "PKT", 3) != 0 || !isdigit(raw[3]) || !isdigit(raw[4]) ||
        !isdigit(raw[5])) {
        printf("bad header\n");
        return 1;
    }
    struct packet p;
    memset(&p, 0, sizeof p);
    p.version = raw[3] - '0';
    p.length = (raw[4] - '0') * 10 + (raw[5] - '0');
    for (int i = 0; i < p.length; i++)
        p.payload[i] = raw[6 + i];
    printf("version %d, %d bytes:", p.version, p.length);
    for (int i = 0; i < p.length && i < MAX_PAYLOAD; i++)
        printf(" %02x", p.payload[i]);
    printf("\n");
    return 0;
}
