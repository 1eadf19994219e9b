{-# LANGUAGE ScopedTypeVariables #-}
-- | Unmanaged client (ghc -main-is Client): client SOCKET NAME HEX_BODY [sync|async]
--
-- Prints the hex response_info, a newline and the response body; on an
-- error status prints its name, a newline and the message, and exits 3.
module Client (main) where

import Control.Exception (throwIO, try)
import qualified Data.ByteString as B
import qualified Data.ByteString.Builder as BB
import qualified Data.ByteString.Char8 as BC
import Data.Char (digitToInt)
import qualified Data.Text as T
import qualified Data.Text.Encoding as TE
import System.Environment (getArgs)
import System.Exit (ExitCode (..), exitWith)
import System.IO (hPutStrLn, stderr, stdout)

import Cumulo

unhex :: String -> B.ByteString
unhex (a : b : rest) = B.cons (fromIntegral (digitToInt a * 16 + digitToInt b)) (unhex rest)
unhex _ = B.empty

main :: IO ()
main = do
  args <- getArgs
  case args of
    socket : name : hex : mode -> do
      result <- withAPI (connectUnmanaged socket (T.pack "/client/haskell/")) $ \api -> try $
        if mode == ["async"]
          then do
            tid <- sendAsync api (T.pack name) (unhex hex)
            a <- recvAsync api (Just tid) Nothing
            if answerStatus a == statusOk then pure (answerInfo a, answerBody a)
              else fail' (answerStatus a) (answerBody a)
          else sendSync api (T.pack name) (unhex hex)
      case result of
        Right (info, body) -> do
          BB.hPutBuilder stdout (BB.byteStringHex info <> BB.char7 '\n' <> BB.byteString body)
        Left (e :: CumuloError) -> do
          B.putStr (TE.encodeUtf8 (statusName (errorStatus e)) <> BC.pack "\n" <> TE.encodeUtf8 (errorMessage e))
          exitWith (ExitFailure 3)
    _ -> hPutStrLn stderr "usage: client SOCKET NAME HEX_BODY [sync|async]" >> exitWith (ExitFailure 2)
  where
    fail' status body = ioErrorOrThrow (CumuloError status (TE.decodeUtf8 body))
    ioErrorOrThrow = throwIO
